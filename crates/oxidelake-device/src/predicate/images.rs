//! The device layout of a column a predicate program reads: the 8-byte image of each
//! number, or a string column's `Utf8` offsets and bytes.

use std::ops::Range;

use arrow::array::{Array, AsArray, StringArray};
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

/// A string column as `Utf8` (a no-op for `Utf8`; dictionaries and views are
/// materialised), the layout the device string slots use: offsets and bytes.
pub fn string_column(array: &dyn Array) -> Result<StringArray, EngineError> {
    let utf8 = arrow::compute::cast(array, &DataType::Utf8)?;
    Ok(utf8.as_string::<i32>().clone())
}
