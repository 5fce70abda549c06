//! The device layout of a column a predicate program reads: the 8-byte image of each
//! number, or a string column's `Utf8` offsets and bytes; and how float images compare.
//!
//! Float images keep the value's exact bits (a projection or a resident batch reads them
//! back as values, `-0.0` included). Only a *comparison* maps them, through
//! [`float_order_key`]: `-0.0` first becomes `+0.0`, then the bits map to an integer
//! ordered like `f64::total_cmp`. That is DataFusion's comparison semantics: its
//! comparison kernels normalise `-0.0` to `+0.0` before Arrow's total-order compare
//! (`datafusion_physical_expr_common::datum::apply_cmp`), so `-0.0 = 0.0`, NaN equals
//! NaN and is above `+inf`, and a negative NaN is below `-inf`.

use std::ops::Range;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, StringArray};
use arrow::datatypes::{
    DataType, Date32Type, Date64Type, Decimal128Type, DurationMicrosecondType,
    DurationMillisecondType, DurationNanosecondType, DurationSecondType, Float32Type, Float64Type,
    Int8Type, Int16Type, Int32Type, Int64Type, Time32MillisecondType, Time32SecondType,
    Time64MicrosecondType, Time64NanosecondType, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type, UInt16Type,
    UInt32Type,
};
use oxidelake_core::EngineError;

/// Writes the 8-byte images of `column[range]` into `out` (`out.len() >= range.len()`):
/// integer-like values widened to `i64`, floats widened to `f64` and stored as their
/// bit pattern. A NULL slot gets whatever its buffer holds; readers check validity.
pub fn write_images(
    column: &dyn Array,
    range: Range<usize>,
    out: &mut [i64],
) -> Result<(), EngineError> {
    let n = range.len();
    if out.len() < n || range.end > column.len() {
        return Err(EngineError::InvalidArgument {
            what: "image range",
            detail: format!(
                "rows {range:?} of {} into {} slots",
                column.len(),
                out.len()
            ),
        });
    }
    let out = &mut out[..n];
    macro_rules! widen {
        ($t:ty) => {{
            let values = &column.as_primitive::<$t>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = i64::from(*v));
        }};
    }
    match column.data_type() {
        DataType::Int8 => widen!(Int8Type),
        DataType::Int16 => widen!(Int16Type),
        DataType::Int32 => widen!(Int32Type),
        DataType::Int64 => widen!(Int64Type),
        DataType::UInt8 => widen!(UInt8Type),
        DataType::UInt16 => widen!(UInt16Type),
        DataType::UInt32 => widen!(UInt32Type),
        DataType::Date32 => widen!(Date32Type),
        DataType::Date64 => widen!(Date64Type),
        DataType::Time32(TimeUnit::Second) => widen!(Time32SecondType),
        DataType::Time32(TimeUnit::Millisecond) => widen!(Time32MillisecondType),
        DataType::Time64(TimeUnit::Microsecond) => widen!(Time64MicrosecondType),
        DataType::Time64(TimeUnit::Nanosecond) => widen!(Time64NanosecondType),
        DataType::Timestamp(TimeUnit::Second, _) => widen!(TimestampSecondType),
        DataType::Timestamp(TimeUnit::Millisecond, _) => widen!(TimestampMillisecondType),
        DataType::Timestamp(TimeUnit::Microsecond, _) => widen!(TimestampMicrosecondType),
        DataType::Timestamp(TimeUnit::Nanosecond, _) => widen!(TimestampNanosecondType),
        DataType::Duration(TimeUnit::Second) => widen!(DurationSecondType),
        DataType::Duration(TimeUnit::Millisecond) => widen!(DurationMillisecondType),
        DataType::Duration(TimeUnit::Microsecond) => widen!(DurationMicrosecondType),
        DataType::Duration(TimeUnit::Nanosecond) => widen!(DurationNanosecondType),
        DataType::Decimal128(_, _) => {
            let values = &column.as_primitive::<Decimal128Type>().values()[range];
            // Precision <= 18 keeps every valid value below 10^18 < 2^63. A wider value
            // saturates at the i64 bounds instead of wrapping: against a literal strictly
            // inside them (`literal_array` refuses the bounds) every comparison keeps its
            // answer, since a value above i64::MAX is above the literal and so is
            // i64::MAX. Two saturated values may compare equal, so a batch whose compared
            // columns hold such values runs column-to-column comparisons on the CPU
            // (`DeviceProgram::check_column_pairs`).
            out.iter_mut().zip(values).for_each(|(o, v)| {
                *o = i64::try_from(*v).unwrap_or(if *v < 0 { i64::MIN } else { i64::MAX })
            });
        }
        DataType::Boolean => {
            let values = column.as_boolean();
            out.iter_mut()
                .zip(range)
                .for_each(|(o, i)| *o = i64::from(values.value(i)));
        }
        DataType::Float32 => {
            let values = &column.as_primitive::<Float32Type>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = f64::from(*v).to_bits() as i64);
        }
        DataType::Float64 => {
            let values = &column.as_primitive::<Float64Type>().values()[range];
            out.iter_mut()
                .zip(values)
                .for_each(|(o, v)| *o = v.to_bits() as i64);
        }
        other => {
            return Err(EngineError::unsupported(
                "device predicate column",
                format!("{other} has no 8-byte image"),
            ));
        }
    }
    Ok(())
}

/// The integer a float image compares as (the CPU reference of the kernels'
/// `float_order_key` in `filter_project.cu`): `-0.0` takes `+0.0`'s bits, then the bits
/// map to an integer ordered like `f64::total_cmp` (NaN above `+inf`, a negative NaN
/// below `-inf`). So `-0.0` and `+0.0` compare equal, as in SQL and DataFusion, and every
/// other pair of values compares as Arrow's kernels compare them.
#[inline]
pub fn float_order_key(bits: i64) -> i64 {
    // Only the two zeros have no bit set but (perhaps) the sign bit.
    let bits = if (bits as u64) << 1 == 0 { 0 } else { bits };
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// `array` with every `-0.0` replaced by `+0.0` when it is a Float32 or Float64 array
/// holding one (NULL slots and NaNs untouched); any other array as it is. The CPU path
/// compares floats with Arrow's kernels, which order `-0.0` below `+0.0`; comparing the
/// canonical arrays gives DataFusion's answer ([`float_order_key`]). DataFusion's own
/// normalisation does the same, but this crate does not depend on DataFusion.
pub fn canonical_float_zeros(array: &ArrayRef) -> ArrayRef {
    match array.data_type() {
        DataType::Float64 => {
            let values = array.as_primitive::<Float64Type>();
            // A fold rather than `any`: without the early exit the scan vectorises, and
            // a column without a `-0.0` (the usual case) is read to its end either way.
            let negative_zero = (-0.0f64).to_bits();
            if !values
                .values()
                .iter()
                .fold(false, |seen, v| seen | (v.to_bits() == negative_zero))
            {
                return Arc::clone(array);
            }
            // `v == 0.0` holds for both zeros and for nothing else (not for NaN).
            Arc::new(values.unary::<_, Float64Type>(|v| if v == 0.0 { 0.0 } else { v }))
        }
        DataType::Float32 => {
            let values = array.as_primitive::<Float32Type>();
            // A fold rather than `any`: without the early exit the scan vectorises, and
            // a column without a `-0.0` (the usual case) is read to its end either way.
            let negative_zero = (-0.0f32).to_bits();
            if !values
                .values()
                .iter()
                .fold(false, |seen, v| seen | (v.to_bits() == negative_zero))
            {
                return Arc::clone(array);
            }
            Arc::new(values.unary::<_, Float32Type>(|v| if v == 0.0 { 0.0 } else { v }))
        }
        _ => Arc::clone(array),
    }
}

/// A string column as `Utf8` (a no-op for `Utf8`; dictionaries and views are
/// materialised), the layout the device string slots use: offsets and bytes.
pub fn string_column(array: &dyn Array) -> Result<StringArray, EngineError> {
    let utf8 = arrow::compute::cast(array, &DataType::Utf8)?;
    Ok(utf8.as_string::<i32>().clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};

    fn key(v: f64) -> i64 {
        float_order_key(v.to_bits() as i64)
    }

    #[test]
    fn float_order_keys_hold_signed_zeros_equal_and_order_the_rest_like_total_cmp() {
        // -0.0 and +0.0 compare equal, whichever side each is on.
        assert_eq!(key(-0.0), key(0.0));
        assert_eq!(key(-0.0), 0);
        // Every other pair compares as f64::total_cmp does: NaN above +inf, a negative
        // NaN below -inf, the smallest subnormals on either side of the zeros.
        let ordered = [
            -f64::NAN,
            f64::NEG_INFINITY,
            f64::MIN,
            -1.5,
            -f64::from_bits(1),
            0.0,
            f64::from_bits(1),
            2.25,
            f64::MAX,
            f64::INFINITY,
            f64::NAN,
        ];
        for (i, a) in ordered.iter().enumerate() {
            for (j, b) in ordered.iter().enumerate() {
                assert_eq!(key(*a).cmp(&key(*b)), i.cmp(&j), "{a:?} vs {b:?}");
                assert_eq!(key(*a).cmp(&key(*b)), a.total_cmp(b), "{a:?} vs {b:?}");
            }
        }
        // The image of a Float32 value is its widened f64: its -0.0 is the same key.
        assert_eq!(key(f64::from(-0.0f32)), key(0.0));
    }

    #[test]
    fn images_keep_the_sign_of_zero_for_readers_of_values() {
        let column = Float64Array::from(vec![-0.0, 0.0, -1.0]);
        let mut out = [0i64; 3];
        write_images(&column, 0..3, &mut out).unwrap();
        assert_eq!(out[0], (-0.0f64).to_bits() as i64);
        assert_eq!(out[1], 0);
        assert_eq!(float_order_key(out[0]), float_order_key(out[1]));
    }

    #[test]
    fn canonical_float_zeros_replaces_only_negative_zeros_and_keeps_nulls() {
        let column: ArrayRef = Arc::new(Float64Array::from(vec![
            Some(-0.0),
            None,
            Some(f64::NAN),
            Some(-2.0),
            Some(0.0),
        ]));
        let canonical = canonical_float_zeros(&column);
        let values = canonical.as_primitive::<Float64Type>();
        assert_eq!(values.value(0).to_bits(), 0.0f64.to_bits());
        assert!(values.is_null(1));
        assert!(values.value(2).is_nan());
        assert_eq!(values.value(3), -2.0);
        assert_eq!(values.value(4).to_bits(), 0.0f64.to_bits());
        let single: ArrayRef = Arc::new(Float32Array::from(vec![-0.0f32, 1.0]));
        let canonical = canonical_float_zeros(&single);
        assert_eq!(
            canonical.as_primitive::<Float32Type>().value(0).to_bits(),
            0.0f32.to_bits()
        );
        // Nothing to replace: the same array, not a copy.
        let plain: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 0.0]));
        assert!(Arc::ptr_eq(&canonical_float_zeros(&plain), &plain));
    }
}
