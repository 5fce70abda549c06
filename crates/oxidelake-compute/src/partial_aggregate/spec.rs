//! What a GPU partial aggregate computes, and how DataFusion's partial state columns are
//! made from the backend's SUM / COUNT / MIN / MAX over 8-byte images.
//!
//! The backends' aggregation op has one numeric model: 64-bit integer images and
//! doubles. Integers, dates and decimals are read as their images where they lie; an
//! integer or decimal SUM is summed as the two 32-bit halves of its images, which cannot
//! overflow in a batch under 2^31 rows; a COUNT reads only its argument's validity. On
//! the host a batch gets two more kinds of column first: the casts DataFusion's type
//! coercion put on an argument, and, for a decimal SUM or AVG whose values leave 64 bits
//! in that batch, three limbs per value ([`wide_limbs`]).
//!
//! The halves' and limbs' sums are joined exactly on the host, in i128 with a wrap
//! count, and split into the state (`limbs`): for OxideLake's checked `sum`, the sum
//! wrapped into its state type and how many times it wrapped, as its own accumulators
//! hand it on (`crate::checked_sum`), so a group's sum that leaves the state type reaches
//! the final aggregate exactly; for DataFusion's `sum` and `avg`, the wrapped sum their
//! wrapping additions make. The results are turned into exactly the state types the
//! replaced partial `AggregateExec` declares, so the stock final aggregate merges them.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::buffer::ScalarBuffer;
use arrow::compute::CastOptions;
use arrow::datatypes::{DataType, Date32Type, Decimal128Type, Int64Type, UInt64Type};
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

/// What kind of value an aggregate's argument is, for its state types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ValueKind {
    /// Int8/16/32/64 and Date32, read as their 8-byte images.
    Int,
    /// Float64.
    Float,
    /// Decimal128, read as its unscaled value's image (a SUM whose values leave 64 bits
    /// in a host batch as limbs, [`wide_limbs`]).
    Decimal { scale: i8 },
}

impl ValueKind {
    /// The kind of values of type `dt` under `func`, or why they are not covered.
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
            // Wider decimals (a product of two prices) are summed in limbs when their
            // values do not fit an i64; MIN/MAX would need 128-bit compares.
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

/// A decimal column summed past 64 bits, as three Int64 limbs per value, lowest first:
/// `v = top · 2^64 + middle · 2^32 + low`, `low` and `middle` its two lower 32-bit
/// pieces (non-negative, so their sums over a batch under 2^31 rows are exact as they
/// are), `top` its upper 64 bits (summed by halves). Exact for every i128, whatever
/// precision the column declares; `None` where every valid value fits an i64 (the column
/// is then summed by the halves of its own images). NULL rows keep their validity and
/// hold 0.
pub(crate) fn wide_limbs(values: &ArrayRef) -> Option<[Int64Array; 3]> {
    let decimals = values.as_primitive_opt::<Decimal128Type>()?;
    let fits = |v: &i128| i64::try_from(*v).is_ok();
    // One branch-free pass over every slot first; a NULL slot's value is arbitrary.
    if decimals.values().iter().fold(true, |all, v| all & fits(v))
        || decimals.iter().flatten().all(|v| fits(&v))
    {
        return None;
    }
    let nulls = decimals.nulls().cloned();
    let limb = |f: fn(i128) -> i64| {
        let values: Vec<i64> = decimals.iter().map(|v| f(v.unwrap_or(0))).collect();
        Int64Array::new(ScalarBuffer::from(values), nulls.clone())
    };
    Some([
        limb(|v| (v & 0xffff_ffff) as i64),
        limb(|v| ((v >> 32) & 0xffff_ffff) as i64),
        limb(|v| (v >> 64) as i64),
    ])
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
    fn a_decimal_beyond_an_i64_is_split_into_limbs_that_join_to_it_and_one_within_is_not() {
        let values = vec![
            Some(i128::from(i64::MAX) + 1),
            None,
            Some(-(10i128.pow(37)) - 12_345),
            Some(7),
            Some(-(10i128.pow(38)) + 1),
        ];
        let dec: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(values.clone())
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        let [low, middle, top] = wide_limbs(&dec).expect("values past 64 bits are split");
        for (row, want) in values.iter().enumerate() {
            let joined = (i128::from(top.value(row)) << 64)
                + (i128::from(middle.value(row)) << 32)
                + i128::from(low.value(row));
            assert!((0..1 << 32).contains(&low.value(row)));
            assert!((0..1 << 32).contains(&middle.value(row)));
            match want {
                Some(v) => assert_eq!(joined, *v, "row {row}"),
                None => assert!(low.is_null(row) && top.is_null(row) && joined == 0),
            }
        }
        // Any i128 a valid slot holds, past the declared 38 digits too.
        let extremes: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![i128::MAX, i128::MIN])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        let [low, middle, top] = wide_limbs(&extremes).unwrap();
        for (row, want) in [i128::MAX, i128::MIN].into_iter().enumerate() {
            let joined = (i128::from(top.value(row)) << 64)
                | (i128::from(middle.value(row)) << 32)
                | i128::from(low.value(row));
            assert_eq!(joined, want);
        }
        // A NULL slot holding any value does not make a column wide.
        let within: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::new(
                ScalarBuffer::from(vec![5i128, i128::MAX, -3]),
                Some(arrow::buffer::NullBuffer::from(vec![true, false, true])),
            )
            .with_precision_and_scale(38, 2)
            .unwrap(),
        );
        assert!(wide_limbs(&within).is_none());
    }

    #[test]
    fn device_results_come_back_as_decimal_states_with_the_state_precision() {
        let ints: ArrayRef = Arc::new(Int64Array::from(vec![Some(12345), None, Some(-1)]));
        let back = to_state(&ints, &DataType::Decimal128(25, 2)).unwrap();
        assert_eq!(back.data_type(), &DataType::Decimal128(25, 2));
        assert_eq!(
            back.as_primitive::<Decimal128Type>()
                .iter()
                .collect::<Vec<_>>(),
            vec![Some(12345), None, Some(-1)]
        );
    }
}
