//! The checked `sum`'s arithmetic: wrapping additions that count their wraps
//! ([`WrappingSum`]), the Arrow types whose sums are checked ([`SumType`]), and the
//! steps every accumulator of `checked_sum` shares: adding values and partial states
//! with their wrap counts, and turning a sum and its count into a state or a finished
//! result (see the module docs of `checked_sum`).

use std::hash::Hash;

use arrow::array::{Array, ArrowPrimitiveType, Int64Array, PrimitiveArray};
use arrow::datatypes::{
    DataType, Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type, DecimalType,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Int64Type, UInt64Type, i256,
};
use datafusion::common::{Result, ScalarValue, internal_datafusion_err};

use super::{for_each_valid, sum_overflow_error};

/// The native value of a checked sum type, added and subtracted with a wrap count.
pub(crate) trait WrappingSum: arrow::datatypes::ArrowNativeType + Hash + Eq {
    /// `self + rhs`, wrapped, and how many times the type's range lies between the true
    /// sum and the wrapped one: +1 past the top, −1 past the bottom, 0 when exact.
    fn add_counting(self, rhs: Self) -> (Self, i64);

    /// `self − rhs`, wrapped, with its wrap count as [`Self::add_counting`].
    fn sub_counting(self, rhs: Self) -> (Self, i64);
}

macro_rules! signed_wrapping_sum {
    ($($native:ty),*) => {$(
        impl WrappingSum for $native {
            #[inline]
            fn add_counting(self, rhs: Self) -> (Self, i64) {
                let (sum, wrapped) = self.overflowing_add(rhs);
                // Adding a positive value can only pass the top, a negative one the bottom.
                (sum, if !wrapped { 0 } else if rhs.is_negative() { -1 } else { 1 })
            }

            #[inline]
            fn sub_counting(self, rhs: Self) -> (Self, i64) {
                let (difference, wrapped) = self.overflowing_sub(rhs);
                (difference, if !wrapped { 0 } else if rhs.is_negative() { 1 } else { -1 })
            }
        }
    )*};
}

signed_wrapping_sum!(i32, i64, i128, i256);

impl WrappingSum for u64 {
    #[inline]
    fn add_counting(self, rhs: Self) -> (Self, i64) {
        let (sum, wrapped) = self.overflowing_add(rhs);
        (sum, i64::from(wrapped))
    }

    #[inline]
    fn sub_counting(self, rhs: Self) -> (Self, i64) {
        let (difference, wrapped) = self.overflowing_sub(rhs);
        (difference, -i64::from(wrapped))
    }
}

/// An Arrow type whose sums are checked: integers, durations and decimals.
pub(crate) trait SumType: ArrowPrimitiveType<Native: WrappingSum> + Send + Sync {
    /// Whether a finished sum `value` is a value of `data_type`: a decimal's precision
    /// bounds it more tightly than its native integer does. Integers: always (their
    /// range is the native one, which the wrap count checks).
    fn holds(_value: Self::Native, _data_type: &DataType) -> bool {
        true
    }
}

impl SumType for Int64Type {}
impl SumType for UInt64Type {}
impl SumType for DurationSecondType {}
impl SumType for DurationMillisecondType {}
impl SumType for DurationMicrosecondType {}
impl SumType for DurationNanosecondType {}

macro_rules! decimal_sum_type {
    ($($decimal:ty => $variant:ident),*) => {$(
        impl SumType for $decimal {
            fn holds(value: Self::Native, data_type: &DataType) -> bool {
                match data_type {
                    DataType::$variant(precision, _) => {
                        <$decimal as DecimalType>::is_valid_decimal_precision(value, *precision)
                    }
                    _ => true,
                }
            }
        }
    )*};
}

decimal_sum_type!(
    Decimal32Type => Decimal32,
    Decimal64Type => Decimal64,
    Decimal128Type => Decimal128,
    Decimal256Type => Decimal256
);

/// Adds the valid values of `values` to `sum`, counting wraps into `wraps`; returns
/// whether there was one.
pub(super) fn add_valid<T: SumType>(
    values: &PrimitiveArray<T>,
    sum: &mut T::Native,
    wraps: &mut i64,
) -> bool {
    for_each_valid(values, |value| {
        let (next, wrapped) = sum.add_counting(value);
        *sum = next;
        *wraps += wrapped;
    });
    values.null_count() < values.len()
}

/// Adds the partial states `sums` (wrapped sums) and `wraps` (their wrap counts) to
/// `sum` and `wraps_total`: the sums with the counting addition, then the states' own
/// counts. A state whose sum is NULL (no values) adds nothing, and a NULL count is 0.
/// Returns whether a state had a sum.
pub(super) fn add_states<T: SumType>(
    sums: &PrimitiveArray<T>,
    wraps: &Int64Array,
    sum: &mut T::Native,
    wraps_total: &mut i64,
) -> Result<bool> {
    same_rows(sums, wraps)?;
    let any = add_valid(sums, sum, wraps_total);
    for_each_state_wrap(sums, wraps, |_, k| {
        *wraps_total = wraps_total.wrapping_add(k);
    });
    Ok(any)
}

/// Calls `add(row, k)` for each row of the partial states `sums` and `wraps` whose wrap
/// count `k` is not 0: rare, so the caller stores only then. A state whose sum is NULL
/// (no values) has no count to add, and a NULL count is 0.
#[inline]
pub(super) fn for_each_state_wrap<T: ArrowPrimitiveType>(
    sums: &PrimitiveArray<T>,
    wraps: &Int64Array,
    mut add: impl FnMut(usize, i64),
) {
    for (row, k) in wraps.values().iter().enumerate() {
        if *k != 0 && sums.is_valid(row) && wraps.is_valid(row) {
            add(row, *k);
        }
    }
}

/// The state columns `sums` and `wraps` have as many rows.
pub(super) fn same_rows(sums: &dyn Array, wraps: &Int64Array) -> Result<()> {
    if sums.len() == wraps.len() {
        Ok(())
    } else {
        Err(internal_datafusion_err!(
            "sum: a state of {} sums and {} wrap counts",
            sums.len(),
            wraps.len()
        ))
    }
}

/// A finished `sum` as a scalar of `data_type`: the overflow error when the true sum is
/// not the wrapped one (`wraps` ≠ 0) or a decimal's precision does not hold it.
pub(super) fn finished_scalar<T: SumType>(
    sum: Option<T::Native>,
    wraps: i64,
    data_type: &DataType,
) -> Result<ScalarValue> {
    if wraps != 0 || sum.is_some_and(|value| !T::holds(value, data_type)) {
        return Err(sum_overflow_error(data_type));
    }
    ScalarValue::new_primitive::<T>(sum, data_type)
}

/// A partial state as scalars: the wrapped `sum` (NULL without values) and its wrap
/// count, which the final aggregate adds to its own (see the module docs of
/// `checked_sum`).
pub(super) fn state_scalars<T: SumType>(
    sum: Option<T::Native>,
    wraps: i64,
    data_type: &DataType,
) -> Result<Vec<ScalarValue>> {
    Ok(vec![
        ScalarValue::new_primitive::<T>(sum, data_type)?,
        ScalarValue::Int64(Some(wraps)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrap_count_says_how_far_the_true_sum_lies_from_the_wrapped_one() {
        assert_eq!(i64::MAX.add_counting(1), (i64::MIN, 1));
        assert_eq!(i64::MIN.add_counting(-1), (i64::MAX, -1));
        assert_eq!(5i64.add_counting(-7), (-2, 0));
        assert_eq!(i64::MIN.sub_counting(1), (i64::MAX, -1));
        assert_eq!(i64::MAX.sub_counting(-1), (i64::MIN, 1));
        assert_eq!(u64::MAX.add_counting(1), (0, 1));
        assert_eq!(0u64.sub_counting(1), (u64::MAX, -1));
        assert_eq!(i128::MAX.add_counting(i128::MAX).1, 1);
        assert_eq!(i256::MIN.add_counting(i256::from_i128(-1)).1, -1);
        // Back over the top undoes the count: the sum is exact again.
        let (wrapped, up) = i64::MAX.add_counting(10);
        let (back, down) = wrapped.add_counting(-20);
        assert_eq!((back, up + down), (i64::MAX - 10, 0));
    }

    #[test]
    fn a_decimal_sum_holds_only_the_digits_of_its_precision() {
        let dt = DataType::Decimal128(38, 0);
        let largest = 10i128.pow(38) - 1;
        assert!(Decimal128Type::holds(largest, &dt));
        assert!(!Decimal128Type::holds(largest + 1, &dt));
        assert!(!Decimal128Type::holds(-largest - 1, &dt));
        assert!(Int64Type::holds(i64::MAX, &DataType::Int64));
    }
}
