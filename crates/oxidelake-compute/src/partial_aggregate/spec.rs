//! What a GPU partial aggregate computes, and how DataFusion's partial state columns are
//! made from the device's SUM / COUNT / MIN / MAX over Int64 or Float64 values.
//!
//! The device aggregation op has one numeric model: 64-bit integers (wrapping sums) and
//! doubles. Every covered input is brought to it on the host before the transfer, in one
//! vectorised pass: narrow integers and Date32 widen to Int64, a Decimal128 travels as its
//! unscaled Int64 value when the batch's values fit one (and, for SUM/AVG, as 32-bit limbs
//! when they do not), and a COUNT travels as the validity of its argument only. The device results are turned back into exactly the state types the
//! replaced partial `AggregateExec` declares, so the stock final aggregate merges them.
//!
//! No sum the device computes wraps: an integer column whose batch could overflow an i64
//! sum travels as limbs too, and decimal batches are cut into slices that cannot. The
//! limbs' sums are joined exactly on the host, in i128 with a wrap count, and split into
//! the state (`limbs`): for OxideLake's checked `sum`, the sum wrapped into its
//! state type and how many times it wrapped, as its own accumulators hand it on
//! (`crate::checked_sum`), so a group's sum that leaves the state type reaches the final
//! aggregate exactly; for DataFusion's `sum` and `avg`, the wrapped sum their wrapping
//! additions make.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float64Array, Int64Array};
use arrow::buffer::ScalarBuffer;
use arrow::compute::CastOptions;
use arrow::datatypes::{
    DataType, Date32Type, Decimal128Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt64Type,
};
use datafusion::error::{DataFusionError, Result};

use crate::checked_sum::sum_state_counts_wraps;

/// Largest decimal precision whose unscaled values always fit an i64 (MIN/MAX need it;
/// sums of wider decimals travel in limbs).
pub const MAX_DEVICE_DECIMAL_PRECISION: u8 = 18;

/// An aggregate function of a partial aggregation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartialFunc {
    /// State: the sum (NULL for a group without values), wrapped into its type as
    /// DataFusion's `sum` wraps; also OxideLake's checked `sum` over floats, which keeps
    /// DataFusion's state.
    Sum,
    /// OxideLake's checked `sum` over integers and decimals. State: the sum wrapped into
    /// its type (NULL for a group without values), then its wrap count (Int64, the
    /// `sum(x)[wraps]` field; see `crate::checked_sum`).
    CheckedSum,
    /// State: the number of non-null arguments (COUNT(*) counts rows).
    Count,
    /// State: the smallest value.
    Min,
    /// State: the largest value.
    Max,
    /// State: the count (UInt64), then the sum, as DataFusion's AVG keeps them.
    Avg,
}

impl PartialFunc {
    /// The SQL name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            PartialFunc::Sum | PartialFunc::CheckedSum => "sum",
            PartialFunc::Count => "count",
            PartialFunc::Min => "min",
            PartialFunc::Max => "max",
            PartialFunc::Avg => "avg",
        }
    }

    /// How many state columns the function has in a partial aggregate's output.
    pub fn state_columns(self) -> usize {
        match self {
            PartialFunc::Avg | PartialFunc::CheckedSum => 2,
            _ => 1,
        }
    }
}

/// The argument of one aggregate: an input column, optionally cast first (DataFusion's
/// type coercion writes `CAST(c AS Int64)` for SUM over Int32 and `CAST(c AS Float64)`
/// for AVG over integers; the cast is evaluated on the host with DataFusion's options).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct AggInput {
    /// Index of the input column.
    pub column: usize,
    /// The type the column is cast to, if any.
    pub cast: Option<DataType>,
}

/// One aggregate of a partial aggregation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartialAggSpec {
    /// The function.
    pub func: PartialFunc,
    /// The argument; `None` only for COUNT of a non-null literal (COUNT(*)).
    pub input: Option<AggInput>,
}

/// How a value column travels to the device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// Int8/16/32/64 and Date32, as Int64.
    Int,
    /// Float64.
    Float,
    /// Decimal128, as its unscaled Int64 value (or, for a SUM whose values do not fit an
    /// i64, as 32-bit limbs).
    Decimal { scale: i8 },
}

impl ValueKind {
    /// The device kind of values of type `dt` under `func`, or why they are not covered.
    pub(crate) fn of(func: PartialFunc, dt: &DataType) -> std::result::Result<Self, String> {
        let name = func.name();
        match dt {
            DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => {
                Ok(ValueKind::Int)
            }
            // The sum or average of dates means nothing; MIN/MAX are integer comparisons.
            DataType::Date32 if matches!(func, PartialFunc::Min | PartialFunc::Max) => {
                Ok(ValueKind::Int)
            }
            DataType::Float64 => Ok(ValueKind::Float),
            DataType::Decimal128(p, s) if *p <= MAX_DEVICE_DECIMAL_PRECISION => {
                Ok(ValueKind::Decimal { scale: *s })
            }
            // Wider decimals (a product of two prices) are summed in 32-bit limbs when
            // their values do not fit an i64; MIN/MAX would need 128-bit compares.
            DataType::Decimal128(_, s)
                if matches!(
                    func,
                    PartialFunc::Sum | PartialFunc::CheckedSum | PartialFunc::Avg
                ) =>
            {
                Ok(ValueKind::Decimal { scale: *s })
            }
            other => Err(format!("{name} over {other}")),
        }
    }
}

/// The state types DataFusion's partial aggregate declares for `func` over `value`
/// (checked against the replaced node's schema; the decimal sum's precision is
/// DataFusion's business, only its scale must be the input's).
pub(crate) fn check_state_types(
    func: PartialFunc,
    value: Option<&DataType>,
    states: &[&DataType],
) -> std::result::Result<(), String> {
    let name = func.name();
    let mismatch = || {
        format!(
            "{name} state {states:?} over {}",
            value.map_or("*".to_string(), ToString::to_string)
        )
    };
    let kind = match value {
        Some(dt) => Some(ValueKind::of(func, dt)?),
        None if func == PartialFunc::Count => None,
        None => return Err(format!("{name} without an argument")),
    };
    let sum_ok = |dt: &DataType| match (kind, dt) {
        (Some(ValueKind::Int), DataType::Int64) => true,
        (Some(ValueKind::Float), DataType::Float64) => true,
        (Some(ValueKind::Decimal { scale }), DataType::Decimal128(_, s)) => *s == scale,
        _ => false,
    };
    let ok = match (func, states) {
        (PartialFunc::Count, [DataType::Int64]) => true,
        (PartialFunc::Sum, [dt]) => sum_ok(dt),
        // The checked sum's state: its sum (a checked type: not a float) and wrap count.
        (PartialFunc::CheckedSum, [dt, DataType::Int64]) => {
            sum_state_counts_wraps(dt) && sum_ok(dt)
        }
        (PartialFunc::Min | PartialFunc::Max, [dt]) => Some(*dt) == value,
        (PartialFunc::Avg, [DataType::UInt64, sum]) => {
            // DataFusion averages integers as Float64 (the argument is cast first).
            kind != Some(ValueKind::Int) && sum_ok(sum)
        }
        _ => false,
    };
    if ok { Ok(()) } else { Err(mismatch()) }
}

/// The argument column of `input` in `batch`, cast when the spec says so.
pub(crate) fn argument(
    batch: &arrow::record_batch::RecordBatch,
    input: &AggInput,
) -> Result<ArrayRef> {
    let column = batch.column(input.column);
    match &input.cast {
        None => Ok(Arc::clone(column)),
        Some(to) => {
            // DataFusion's CastExpr raises on a value that does not fit (safe = false).
            let options = CastOptions {
                safe: false,
                ..CastOptions::default()
            };
            Ok(arrow::compute::cast_with_options(column, to, &options)?)
        }
    }
}

/// A value column in the device's numeric model.
#[derive(Debug, Clone)]
pub(crate) enum DeviceValues {
    Int(Int64Array),
    Float(Float64Array),
    /// A decimal column whose values do not all fit an i64, for a SUM: the value is
    /// `Σ limb << shift` over its limbs (`v >> 64`, then the two 32-bit halves of the low
    /// 64 bits, each non-negative), so every limb fits an i64 and sums of limbs are exact.
    Limbs(Vec<(Int64Array, u32)>),
}

impl DeviceValues {
    /// The columns the device aggregates (one, or one per limb) with their shifts.
    pub(crate) fn into_parts(self) -> Vec<(ArrayRef, u32)> {
        match self {
            DeviceValues::Int(a) => vec![(Arc::new(a) as ArrayRef, 0)],
            DeviceValues::Float(a) => vec![(Arc::new(a) as ArrayRef, 0)],
            DeviceValues::Limbs(limbs) => limbs
                .into_iter()
                .map(|(a, shift)| (Arc::new(a) as ArrayRef, shift))
                .collect(),
        }
    }
}

/// `decimals` as Int64 when every slot fits one, NULL slots zeroed; one branch-free
/// pass for the common case (a NULL slot's arbitrary value only sends the batch to the
/// careful path in `to_device`).
fn narrowed(decimals: &arrow::array::Decimal128Array) -> Option<Int64Array> {
    let values = decimals.values();
    let fits = values
        .iter()
        .fold(true, |fits, v| fits & (i128::from(*v as i64) == *v));
    if !fits {
        return None;
    }
    let mut out: Vec<i64> = values.iter().map(|v| *v as i64).collect();
    if let Some(nulls) = decimals.nulls().filter(|n| n.null_count() > 0) {
        for row in nulls
            .iter()
            .enumerate()
            .filter(|(_, valid)| !valid)
            .map(|(r, _)| r)
        {
            out[row] = 0;
        }
    }
    Some(Int64Array::new(
        ScalarBuffer::from(out),
        decimals.nulls().cloned(),
    ))
}

/// `values` in the device's numeric model (see the module docs). `limbs_allowed`: a
/// decimal whose values do not fit an i64 may travel as limbs (SUM and AVG); otherwise
/// such a value is an error naming it.
pub(crate) fn to_device(values: &ArrayRef, limbs_allowed: bool) -> Result<DeviceValues> {
    Ok(match values.data_type() {
        DataType::Int64 => DeviceValues::Int(values.as_primitive::<Int64Type>().clone()),
        DataType::Int32 => DeviceValues::Int(values.as_primitive::<Int32Type>().unary(i64::from)),
        DataType::Int16 => DeviceValues::Int(values.as_primitive::<Int16Type>().unary(i64::from)),
        DataType::Int8 => DeviceValues::Int(values.as_primitive::<Int8Type>().unary(i64::from)),
        DataType::Date32 => DeviceValues::Int(values.as_primitive::<Date32Type>().unary(i64::from)),
        DataType::Float64 => DeviceValues::Float(values.as_primitive::<Float64Type>().clone()),
        DataType::Decimal128(p, _) => {
            // Arrow does not enforce a decimal's precision on its values, so the range is
            // read from the data (null slots may hold anything and become 0).
            let decimals = values.as_primitive::<Decimal128Type>();
            if let Some(ints) = narrowed(decimals) {
                return Ok(DeviceValues::Int(ints));
            }
            let valid = |i: usize| decimals.is_valid(i);
            let fits = decimals
                .values()
                .iter()
                .enumerate()
                .all(|(i, v)| !valid(i) || i64::try_from(*v).is_ok());
            let limb = |f: &dyn Fn(i128) -> i64| {
                let out: Vec<i64> = decimals
                    .values()
                    .iter()
                    .enumerate()
                    .map(|(i, v)| if valid(i) { f(*v) } else { 0 })
                    .collect();
                Int64Array::new(ScalarBuffer::from(out), decimals.nulls().cloned())
            };
            if fits {
                DeviceValues::Int(limb(&|v| v as i64))
            } else if limbs_allowed {
                DeviceValues::Limbs(vec![
                    (limb(&|v| (v >> 64) as i64), 64),
                    (limb(&|v| ((v >> 32) & 0xffff_ffff) as i64), 32),
                    (limb(&|v| (v & 0xffff_ffff) as i64), 0),
                ])
            } else {
                let (i, v) = decimals
                    .values()
                    .iter()
                    .enumerate()
                    .find(|(i, v)| valid(*i) && i64::try_from(**v).is_err())
                    .map_or((0, 0), |(i, v)| (i, *v));
                return Err(DataFusionError::Execution(format!(
                    "decimal value {v} (row {i}) does not fit the 64-bit device path of its \
                     declared precision {p}"
                )));
            }
        }
        other => {
            return Err(DataFusionError::Internal(format!(
                "aggregate value of type {other} reached the device path"
            )));
        }
    })
}

/// An Int64 column whose sums could overflow an i64 within its batch, as two limbs: the
/// high 32 bits (`v >> 32`, signed) and the low 32 bits (non-negative). Each limb sums
/// exactly over batches under 2^31 rows, and `limbs::limb_states` puts the sums together.
pub(crate) fn int_limbs(ints: &Int64Array) -> DeviceValues {
    DeviceValues::Limbs(vec![
        (ints.unary::<_, Int64Type>(|v| v >> 32), 32),
        (ints.unary::<_, Int64Type>(|v| v & 0xffff_ffff), 0),
    ])
}

/// A COUNT's argument as the device sees it: only its validity matters.
pub(crate) fn count_input(values: Option<&ArrayRef>, rows: usize) -> Int64Array {
    Int64Array::new(
        ScalarBuffer::from(vec![0i64; rows]),
        values.and_then(|v| v.logical_nulls()),
    )
}

/// How many rows of an Int64 column can be summed without overflowing an i64: the whole
/// batch unless its largest magnitude says otherwise. Within that many rows the device's
/// i64 sums (of integers, of decimals' unscaled values, of limbs) are exact.
pub(crate) fn rows_per_exact_sum(values: &Int64Array) -> usize {
    // NULL slots are read too (one branch-free pass): their values can only make the
    // slices smaller, never a sum inexact.
    let largest = values
        .values()
        .iter()
        .fold(0u64, |m, v| m.max(v.unsigned_abs()));
    match largest {
        0 => usize::MAX,
        m => usize::try_from(i64::MAX as u64 / m)
            .unwrap_or(usize::MAX)
            .max(1),
    }
}

/// AVG's count state from a device COUNT: UInt64, NULL where no value was seen (the
/// stock AVG's state shares one validity between its count and its sum).
pub(crate) fn avg_count_state(counts: &ArrayRef) -> Result<ArrayRef> {
    let counts = counts.as_primitive_opt::<Int64Type>().ok_or_else(|| {
        DataFusionError::Internal(format!("device count of type {}", counts.data_type()))
    })?;
    let seen = arrow::buffer::NullBuffer::from_iter(counts.values().iter().map(|c| *c > 0));
    Ok(Arc::new(arrow::array::UInt64Array::new(
        counts.values().iter().map(|c| *c as u64).collect(),
        Some(seen),
    )))
}

/// A device result column (Int64 or Float64) as a state column of type `to`.
pub(crate) fn to_state(result: &ArrayRef, to: &DataType) -> Result<ArrayRef> {
    if result.data_type() == to {
        return Ok(Arc::clone(result));
    }
    let ints = || {
        result.as_primitive_opt::<Int64Type>().ok_or_else(|| {
            DataFusionError::Internal(format!(
                "device result {} for state {to}",
                result.data_type()
            ))
        })
    };
    Ok(match to {
        DataType::UInt64 => Arc::new(ints()?.unary::<_, UInt64Type>(|v| v as u64)),
        DataType::Decimal128(p, s) => Arc::new(
            ints()?
                .unary::<_, Decimal128Type>(i128::from)
                .with_precision_and_scale(*p, *s)?,
        ),
        DataType::Date32 => Arc::new(ints()?.unary::<_, Date32Type>(|v| v as i32)),
        // Narrow integers: MIN/MAX results are input values, so the cast is exact.
        DataType::Int8 | DataType::Int16 | DataType::Int32 => arrow::compute::cast(ints()?, to)?,
        other => {
            return Err(DataFusionError::Internal(format!(
                "no conversion from a device result to a {other} state"
            )));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partial_aggregate::limbs::limb_states;

    #[test]
    fn decimal_states_keep_the_input_scale_integers_average_as_floats_and_wide_decimals_only_sum() {
        let dec = DataType::Decimal128(15, 2);
        let sum = DataType::Decimal128(25, 2);
        assert!(check_state_types(PartialFunc::Sum, Some(&dec), &[&sum]).is_ok());
        let wrong_scale = DataType::Decimal128(25, 3);
        assert!(check_state_types(PartialFunc::Sum, Some(&dec), &[&wrong_scale]).is_err());
        assert!(
            check_state_types(PartialFunc::Avg, Some(&dec), &[&DataType::UInt64, &sum]).is_ok()
        );
        assert!(
            check_state_types(
                PartialFunc::Avg,
                Some(&DataType::Int64),
                &[&DataType::UInt64, &DataType::Float64]
            )
            .is_err()
        );
        assert!(check_state_types(PartialFunc::Count, None, &[&DataType::Int64]).is_ok());
        assert!(
            check_state_types(
                PartialFunc::Sum,
                Some(&DataType::Date32),
                &[&DataType::Int64]
            )
            .is_err()
        );
        // Sums of wide decimals travel in limbs; their MIN/MAX would need 128-bit compares.
        assert!(ValueKind::of(PartialFunc::Sum, &DataType::Decimal128(38, 4)).is_ok());
        assert!(
            ValueKind::of(PartialFunc::Min, &DataType::Decimal128(19, 2))
                .is_err_and(|r| r.contains("min over Decimal128(19, 2)"))
        );
    }

    #[test]
    fn exact_sum_slices_shrink_with_the_largest_magnitude() {
        let small = Int64Array::from(vec![Some(-5), None, Some(3)]);
        assert_eq!(rows_per_exact_sum(&small), (i64::MAX / 5) as usize);
        let huge = Int64Array::from(vec![i64::MIN, 1]);
        assert_eq!(rows_per_exact_sum(&huge), 1);
        let zeros = Int64Array::from(vec![0, 0]);
        assert_eq!(rows_per_exact_sum(&zeros), usize::MAX);
    }

    #[test]
    fn a_null_decimal_slot_never_reaches_the_device_whatever_value_it_holds() {
        use arrow::buffer::NullBuffer;
        // NULL slots holding a small and an i64-overflowing value: the first takes the
        // one-pass path, the second the careful one; both send 0 with the NULL kept.
        for garbage in [77i128, i128::MAX] {
            let dec: ArrayRef = Arc::new(
                arrow::array::Decimal128Array::new(
                    ScalarBuffer::from(vec![5i128, garbage, -3]),
                    Some(NullBuffer::from(vec![true, false, true])),
                )
                .with_precision_and_scale(15, 2)
                .unwrap(),
            );
            let DeviceValues::Int(ints) = to_device(&dec, false).unwrap() else {
                panic!("valid values within an i64 travel as one Int64 column");
            };
            assert_eq!(ints.values().to_vec(), vec![5, 0, -3]);
            assert_eq!(
                ints.iter().collect::<Vec<_>>(),
                vec![Some(5), None, Some(-3)]
            );
            assert_eq!(rows_per_exact_sum(&ints), (i64::MAX / 5) as usize);
        }
    }

    #[test]
    fn decimals_travel_unscaled_and_come_back_with_the_state_precision() {
        let dec: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![Some(12345), None, Some(-1)])
                .with_precision_and_scale(15, 2)
                .unwrap(),
        );
        let DeviceValues::Int(ints) = to_device(&dec, false).unwrap() else {
            panic!("decimals travel as integers");
        };
        assert_eq!(
            ints.iter().collect::<Vec<_>>(),
            vec![Some(12345), None, Some(-1)]
        );
        let back = to_state(&(Arc::new(ints) as ArrayRef), &DataType::Decimal128(25, 2)).unwrap();
        assert_eq!(back.data_type(), &DataType::Decimal128(25, 2));
        assert_eq!(
            back.as_primitive::<Decimal128Type>()
                .iter()
                .collect::<Vec<_>>(),
            vec![Some(12345), None, Some(-1)]
        );
    }

    #[test]
    fn a_decimal_beyond_an_i64_is_summed_in_limbs_or_is_an_error_never_a_truncation() {
        let values = vec![
            Some(i128::from(i64::MAX) + 1),
            None,
            Some(-(10i128.pow(37)) - 12_345),
            Some(7),
        ];
        let dec: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(values.clone())
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        assert!(to_device(&dec, false).is_err());
        let DeviceValues::Limbs(limbs) = to_device(&dec, true).unwrap() else {
            panic!("wide decimals travel as limbs");
        };
        // Each row's limbs put back together give the value (a "sum" of one row).
        for (row, want) in values.iter().enumerate() {
            let rows: Vec<ArrayRef> = limbs
                .iter()
                .map(|(a, _)| Arc::new(a.slice(row, 1)) as ArrayRef)
                .collect();
            let parts: Vec<(&ArrayRef, u32)> =
                rows.iter().zip(&limbs).map(|(a, (_, s))| (a, *s)).collect();
            let joined = limb_states(&parts, &DataType::Decimal128(38, 0), false).unwrap();
            let joined = joined[0].as_primitive::<Decimal128Type>();
            assert_eq!(joined.iter().next().unwrap(), *want, "row {row}");
        }
        for (limb, _) in limbs.iter().skip(1) {
            assert!(
                limb.iter().flatten().all(|v| v >= 0),
                "low limbs are non-negative"
            );
        }
    }
}
