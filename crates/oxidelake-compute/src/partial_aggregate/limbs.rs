//! Device sums put back together on the host: the limbs' sums of a value joined exactly
//! (in i128, with `checked_sum`'s wrap count) and split into a partial aggregate's sum
//! state (see the module docs of `spec` for why sums travel as limbs). For OxideLake's
//! checked `sum` the state is the sum wrapped into its type and how many times it
//! wrapped (`crate::checked_sum`); for DataFusion's `sum` and `avg`, the wrapped sum
//! their wrapping additions make.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Int64Array};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Int64Type};
use datafusion::error::{DataFusionError, Result};

use crate::checked_sum::WrappingSum;

/// `Σ sum_i << shift_i` over the device sums of a value's limbs, per group and exactly,
/// as the state columns of a sum of type `to` (Int64 or Decimal128): the sum wrapped into
/// `to`, then, where `counted` (the checked `sum`'s state), how many times 2^64 (Int64)
/// or 2^128 (Decimal128) lie between the wrapped sum and the true one. Without `counted`
/// (DataFusion's `sum`, `avg`) the wrapped sum alone, which is what their wrapping
/// additions make of the same values. NULL where the sums are (a group without values),
/// with a count of 0.
pub(crate) fn limb_states(
    sums: &[(&ArrayRef, u32)],
    to: &DataType,
    counted: bool,
) -> Result<Vec<ArrayRef>> {
    let Some((first, _)) = sums.first() else {
        return Err(DataFusionError::Internal("no limbs".into()));
    };
    let rows = first.len();
    let parts: Vec<(&Int64Array, u32)> = sums
        .iter()
        .map(|(a, shift)| match a.as_primitive_opt::<Int64Type>() {
            Some(a) if a.len() == rows => Ok((a, *shift)),
            _ => Err(DataFusionError::Internal(format!(
                "limb sum of type {} and {} rows, {rows} expected",
                a.data_type(),
                a.len()
            ))),
        })
        .collect::<Result<_>>()?;
    let nulls = first.nulls().cloned();
    let valid = |row: usize| nulls.as_ref().is_none_or(|n| n.is_valid(row));
    // A NULL group's limb sums are 0; its slot holds 0 whatever they are.
    let joined = (0..rows).map(|row| {
        if valid(row) {
            exact_join(&parts, row)
        } else {
            (0, 0)
        }
    });
    let (column, wraps): (ArrayRef, Vec<i64>) = match to {
        DataType::Int64 => {
            let (values, wraps): (Vec<i64>, Vec<i64>) = joined
                .map(|(total, wraps)| int64_state(total, wraps))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .unzip();
            (
                Arc::new(Int64Array::new(ScalarBuffer::from(values), nulls)),
                wraps,
            )
        }
        DataType::Decimal128(p, s) => {
            let (values, wraps): (Vec<i128>, Vec<i64>) = joined.unzip();
            let decimals = arrow::array::Decimal128Array::new(ScalarBuffer::from(values), nulls)
                .with_precision_and_scale(*p, *s)?;
            (Arc::new(decimals), wraps)
        }
        other => {
            return Err(DataFusionError::Internal(format!(
                "limbs summed into a {other} state"
            )));
        }
    };
    let mut columns = vec![column];
    if counted {
        columns.push(Arc::new(Int64Array::new(ScalarBuffer::from(wraps), None)));
    }
    Ok(columns)
}

/// One row's `Σ sum << shift` over limb sums, exactly: the total wrapped into an i128,
/// and how many times 2^128 lies between it and the true total (the terms are added with
/// `checked_sum`'s wrap count, so neither depends on the order of the limbs).
fn exact_join(parts: &[(&Int64Array, u32)], row: usize) -> (i128, i64) {
    let (mut total, mut wraps) = (0i128, 0i64);
    for (sums, shift) in parts {
        let (term, over) = shifted(i128::from(sums.value(row)), *shift);
        let (next, wrapped) = total.add_counting(term);
        total = next;
        wraps += wrapped + over;
    }
    (total, wraps)
}

/// `v · 2^shift` (`shift` below 128) as an i128 and how many times 2^128 lies between
/// that and the true product: the bits shifted past the top are counted, not lost.
fn shifted(v: i128, shift: u32) -> (i128, i64) {
    if shift == 0 {
        return (v, 0);
    }
    // v · 2^s = W · 2^128 + U, U the low 128 bits (unsigned), W = ⌊v / 2^(128-s)⌋; read
    // signed, U is 2^128 less where its top bit is set.
    let term = v << shift;
    let over = (v >> (128 - shift)) + i128::from(term < 0);
    (term, over as i64)
}

/// The true sum `total + wraps128 · 2^128` as an Int64 state: wrapped into an i64, and
/// how many times 2^64 lies between that and the true sum. Limb sums of fewer than 2^31
/// rows stay far within the count's range; past it is an internal error.
fn int64_state(total: i128, wraps128: i64) -> Result<(i64, i64)> {
    let low = total as i64;
    // total = (total >> 64) · 2^64 + (total mod 2^64), and total mod 2^64 is `low`, or
    // `low + 2^64` where `low` is negative.
    let high = (total >> 64) + i128::from(low < 0) + (i128::from(wraps128) << 64);
    let wraps = i64::try_from(high).map_err(|_| {
        DataFusionError::Internal(format!(
            "a limb sum of {total} + {wraps128}·2^128 is past an Int64 state's wrap count"
        ))
    })?;
    Ok((low, wraps))
}

#[cfg(test)]
mod tests {
    use arrow::datatypes::Decimal128Type;

    use super::*;
    use crate::partial_aggregate::spec::wide_limbs;

    /// The sums of the 32-bit halves of each limb's images over one group, as the
    /// backends compute them, with their shifts.
    fn halves_sums(limbs: &[(Vec<i64>, u32)]) -> Vec<(ArrayRef, u32)> {
        let sum = |f: &dyn Fn(i64) -> i64, values: &[i64]| {
            let total = values
                .iter()
                .fold(0i64, |a, v| a.checked_add(f(*v)).unwrap());
            Arc::new(Int64Array::from(vec![total])) as ArrayRef
        };
        limbs
            .iter()
            .flat_map(|(values, shift)| {
                [
                    (sum(&|v| i64::from(v as u32), values), *shift),
                    (sum(&|v| v >> 32, values), shift + 32),
                ]
            })
            .collect()
    }

    /// The sums of a wide decimal column's limbs as the plan reads them: the two lower
    /// limbs as they are, the top one by halves.
    fn limb_sums(dec: &ArrayRef) -> Vec<(ArrayRef, u32)> {
        let [low, middle, top] = wide_limbs(dec).unwrap();
        let total = |limb: &Int64Array| {
            let sum = limb
                .values()
                .iter()
                .fold(0i64, |a, v| a.checked_add(*v).unwrap());
            Arc::new(Int64Array::from(vec![sum])) as ArrayRef
        };
        let mut sums = vec![(total(&low), 0), (total(&middle), 32)];
        sums.extend(halves_sums(&[(top.values().to_vec(), 64)]));
        sums
    }

    /// The checked `sum`'s state columns of type `to` from `sums`: the wrapped sum and
    /// its wrap count.
    fn joined_sum(sums: &[(ArrayRef, u32)], to: &DataType) -> (ArrayRef, i64) {
        let parts: Vec<(&ArrayRef, u32)> = sums.iter().map(|(a, s)| (a, *s)).collect();
        let states = limb_states(&parts, to, true).unwrap();
        assert_eq!(states.len(), 2, "the checked sum's state is two columns");
        let wraps = states[1].as_primitive::<Int64Type>().value(0);
        (Arc::clone(&states[0]), wraps)
    }

    #[test]
    fn an_integer_sum_by_halves_past_int64_is_carried_as_its_wrapped_sum_and_wrap_count() {
        let sum_of = |values: Vec<i64>| {
            let (joined, wraps) = joined_sum(&halves_sums(&[(values, 0)]), &DataType::Int64);
            (joined.as_primitive::<Int64Type>().value(0), wraps)
        };
        assert_eq!(sum_of(vec![i64::MAX, -5, i64::MIN + 1]), (-5, 0));
        // i64::MAX + 1 and i64::MIN - 1: the halves' sums are exact, the state holds the
        // wrapped sum and how many times 2^64 it lies from the true one.
        assert_eq!(sum_of(vec![i64::MAX, 1]), (i64::MIN, 1));
        assert_eq!(sum_of(vec![i64::MIN, -1]), (i64::MAX, -1));
        // Three times i64::MIN: −3·2^63 = i64::MIN − 2^64.
        assert_eq!(sum_of(vec![i64::MIN; 3]), (i64::MIN, -1));
    }

    #[test]
    fn wide_decimal_limbs_summed_by_halves_join_past_an_i128_with_the_bits_above_counted() {
        // 2 · 9.9·10^37: past i128::MAX (about 1.7·10^38), so the state wraps once.
        let big = 99 * 10i128.pow(36);
        let dec: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![big, big, -7])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        let sums = limb_sums(&dec);
        let (joined, wraps) = joined_sum(&sums, &DataType::Decimal128(38, 0));
        assert_eq!(wraps, 1, "the true sum lies 2^128 above the state's");
        assert_eq!(
            joined.as_primitive::<Decimal128Type>().value(0),
            big.wrapping_mul(2).wrapping_sub(7),
            "the wrapped sum is the true one modulo 2^128"
        );
    }

    #[test]
    fn a_decimal_sum_by_limbs_past_an_i128_is_carried_as_its_wrapped_sum_and_wrap_count() {
        // Limb sums of one group whose total is 2^127 + 2^64, past i128::MAX.
        let sums: Vec<ArrayRef> = [i64::MAX, 1 << 33, 0]
            .into_iter()
            .map(|sum| Arc::new(Int64Array::from(vec![sum])) as ArrayRef)
            .collect();
        let parts: Vec<(&ArrayRef, u32)> = sums.iter().zip([64, 32, 0]).collect();
        let dt = DataType::Decimal128(38, 0);
        let checked = limb_states(&parts, &dt, true).unwrap();
        let wrapped = i128::MIN + (1 << 64);
        assert_eq!(
            checked[0].as_primitive::<Decimal128Type>().value(0),
            wrapped
        );
        assert_eq!(checked[1].as_primitive::<Int64Type>().value(0), 1);
        // DataFusion's `sum` and `avg` get the wrapped sum alone, as their additions wrap.
        let stock = limb_states(&parts, &dt, false).unwrap();
        assert_eq!(stock.len(), 1);
        assert_eq!(stock[0].as_primitive::<Decimal128Type>().value(0), wrapped);
        // Within an i128 (past 38 digits, for the final aggregate to refuse): exact.
        let six = 6 * 10i128.pow(37);
        let dec: ArrayRef = Arc::new(
            arrow::array::Decimal128Array::from(vec![six, six])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        let (joined, wraps) = joined_sum(&limb_sums(&dec), &dt);
        assert_eq!(joined.as_primitive::<Decimal128Type>().value(0), 2 * six);
        assert_eq!(wraps, 0);
    }

    #[test]
    fn a_group_without_values_has_a_null_sum_and_no_wraps() {
        let limb = |v: Option<i64>| Arc::new(Int64Array::from(vec![Some(3), v])) as ArrayRef;
        let (high, low) = (limb(None), limb(None));
        let states = limb_states(&[(&high, 32), (&low, 0)], &DataType::Int64, true).unwrap();
        let sums: Vec<Option<i64>> = states[0].as_primitive::<Int64Type>().iter().collect();
        assert_eq!(sums, vec![Some((3 << 32) + 3), None]);
        let wraps: Vec<Option<i64>> = states[1].as_primitive::<Int64Type>().iter().collect();
        assert_eq!(wraps, vec![Some(0), Some(0)]);
    }
}
