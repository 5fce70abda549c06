//! The grouped accumulator of the checked `sum`: DataFusion's `PrimitiveGroupsAccumulator`
//! loop (one wrapping addition per row into the group's sum, NULLs and filters through
//! DataFusion's `NullState`) plus a wrap count per group, handed on in the state beside
//! the wrapped sum and checked only when results are emitted.

use std::mem::size_of;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, PrimitiveArray};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::{DataType, Int64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::NullState;

use super::wrapping::{SumType, WrappingSum, for_each_state_wrap, same_rows};
use super::{primitive, sum_overflow_error, zero_wraps};

/// Per-group checked sums of type `T` (see the module docs of `checked_sum`).
pub(super) struct SumGroupsAccumulator<T: SumType> {
    /// The sum's type (its precision and scale for decimals).
    data_type: DataType,
    /// The wrapped sum of each group.
    sums: Vec<T::Native>,
    /// Each group's wrap count: 0 while its sum is exact.
    wraps: Vec<i64>,
    /// Which groups saw a value (the others are NULL).
    null_state: NullState,
}

impl<T: SumType> SumGroupsAccumulator<T> {
    /// An accumulator of sums of type `data_type`.
    pub(super) fn new(data_type: &DataType) -> Self {
        Self {
            data_type: data_type.clone(),
            sums: Vec::new(),
            wraps: Vec::new(),
            null_state: NullState::new(),
        }
    }

    /// Adds `values` (an input or a state column) to the sums of their groups.
    fn add(
        &mut self,
        values: &PrimitiveArray<T>,
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) {
        self.sums.resize(total_num_groups, T::default_value());
        self.wraps.resize(total_num_groups, 0);
        let (sums, wraps) = (&mut self.sums, &mut self.wraps);
        self.null_state.accumulate(
            group_indices,
            values,
            opt_filter,
            total_num_groups,
            |group, value| {
                let (sum, wrapped) = sums[group].add_counting(value);
                sums[group] = sum;
                // Rare: no store to the wrap counts on the common path.
                if wrapped != 0 {
                    wraps[group] += wrapped;
                }
            },
        );
    }

    /// Adds the wrap counts `wraps` of the states `sums` to their groups: rare, so one
    /// pass that stores only where a count is not 0 (a state without a sum has none).
    fn add_state_wraps(
        &mut self,
        sums: &PrimitiveArray<T>,
        wraps: &Int64Array,
        group_indices: &[usize],
    ) {
        for_each_state_wrap(sums, wraps, |row, k| {
            // A row past `group_indices` has no group (DataFusion gives one per row).
            if let Some(group) = group_indices.get(row) {
                self.wraps[*group] = self.wraps[*group].wrapping_add(k);
            }
        });
    }

    /// The wrapped sums of the groups `emit_to` names (NULL for a group without
    /// values) and their wrap counts (0 for a group without values).
    fn take(&mut self, emit_to: EmitTo) -> (PrimitiveArray<T>, Vec<i64>) {
        let sums = emit_to.take_needed(&mut self.sums);
        let wraps = emit_to.take_needed(&mut self.wraps);
        let nulls = self.null_state.build(emit_to);
        let sums =
            PrimitiveArray::<T>::new(sums.into(), nulls).with_data_type(self.data_type.clone());
        (sums, wraps)
    }
}

impl<T: SumType> GroupsAccumulator for SumGroupsAccumulator<T> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let values = primitive::<T>(values, 0)?;
        self.add(values, group_indices, opt_filter, total_num_groups);
        Ok(())
    }

    /// The finished sums: the overflow error when a group's true sum is not its wrapped
    /// one or a decimal's precision does not hold it. A group without values has a sum
    /// of 0 and no wraps, so every slot can be checked without its validity.
    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let (sums, wraps) = self.take(emit_to);
        let wrapped = wraps.iter().any(|w| *w != 0);
        if wrapped || !sums.values().iter().all(|s| T::holds(*s, &self.data_type)) {
            return Err(sum_overflow_error(&self.data_type));
        }
        Ok(Arc::new(sums))
    }

    /// The wrapped sums and their wrap counts, unchecked: only the final result can
    /// overflow (see the module docs of `checked_sum`).
    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        let (sums, wraps) = self.take(emit_to);
        let wraps = Int64Array::new(ScalarBuffer::from(wraps), None);
        Ok(vec![Arc::new(sums), Arc::new(wraps)])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        // The states' wrapped sums add with the same wrap count as values do; their own
        // counts add to their groups' counts.
        let sums = primitive::<T>(values, 0)?;
        let wraps = primitive::<Int64Type>(values, 1)?;
        same_rows(sums, wraps)?;
        self.add(sums, group_indices, None, total_num_groups);
        self.add_state_wraps(sums, wraps, group_indices);
        Ok(())
    }

    /// Each row as its own state: its value, NULL where the value is NULL or the filter
    /// is not true (no addition, so nothing to check), with a wrap count of 0.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let values = primitive::<T>(values, 0)?;
        let passed = opt_filter.map(|filter| {
            NullBuffer::new(
                arrow::compute::prep_null_mask_filter(filter)
                    .values()
                    .clone(),
            )
        });
        let nulls = NullBuffer::union(values.nulls(), passed.as_ref());
        let states = PrimitiveArray::<T>::new(values.values().clone(), nulls)
            .with_data_type(self.data_type.clone());
        let wraps = zero_wraps(values.len());
        Ok(vec![Arc::new(states), Arc::new(wraps)])
    }

    fn size(&self) -> usize {
        self.sums.capacity() * size_of::<T::Native>()
            + self.wraps.capacity() * size_of::<i64>()
            + self.null_state.size()
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{AsArray, Decimal128Array, Int64Array};
    use arrow::datatypes::{Decimal128Type, Int64Type};

    use super::*;

    fn int64s(values: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }

    fn sums_of(array: &ArrayRef) -> Vec<Option<i64>> {
        array.as_primitive::<Int64Type>().iter().collect()
    }

    fn overflows(result: Result<impl Sized>) -> bool {
        result.is_err_and(|e| {
            e.to_string()
                .contains("Arithmetic overflow: SUM over Int64 exceeds its range")
        })
    }

    #[test]
    fn a_group_past_i64_max_is_an_error_and_a_group_that_comes_back_within_range_is_exact() {
        // Group 1 ends past the top: the error, though group 0 fits.
        let mut acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(i64::MAX), Some(i64::MAX), Some(10), Some(-20)]);
        acc.update_batch(&[values], &[0, 1, 1, 0], None, 2).unwrap();
        assert!(overflows(acc.evaluate(EmitTo::All)));

        // Group 0 passes the top and comes back: exact.
        let mut acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(i64::MAX), Some(7), Some(10), Some(-20)]);
        acc.update_batch(&[values], &[0, 1, 0, 0], None, 2).unwrap();
        let sums = acc.evaluate(EmitTo::All).unwrap();
        assert_eq!(sums_of(&sums), vec![Some(i64::MAX - 10), Some(7)]);
    }

    #[test]
    fn only_the_emitted_groups_are_checked() {
        let mut acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(3), Some(i64::MAX), Some(i64::MAX)]);
        acc.update_batch(&[values], &[0, 1, 1], None, 2).unwrap();
        let first = acc.evaluate(EmitTo::First(1)).unwrap();
        assert_eq!(sums_of(&first), vec![Some(3)]);
        assert!(overflows(acc.evaluate(EmitTo::All)));
    }

    #[test]
    fn nulls_and_filtered_rows_add_nothing_and_a_group_without_values_is_null() {
        let mut acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        // The NULL and the filtered-out row would overflow group 0 if they were added.
        let values = int64s(vec![Some(i64::MAX), None, Some(i64::MAX), Some(4), None]);
        let filter =
            BooleanArray::from(vec![Some(true), Some(true), Some(false), Some(true), None]);
        acc.update_batch(&[values], &[0, 0, 0, 1, 2], Some(&filter), 3)
            .unwrap();
        let sums = acc.evaluate(EmitTo::All).unwrap();
        assert_eq!(sums_of(&sums), vec![Some(i64::MAX), Some(4), None]);
    }

    /// The states of a partial aggregate of `values`, whose rows go to groups 0 and 1 by
    /// turns.
    fn partial_state(values: Vec<Option<i64>>) -> Vec<ArrayRef> {
        let mut partial = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let groups: Vec<usize> = (0..values.len()).map(|row| row % 2).collect();
        partial
            .update_batch(&[int64s(values)], &groups, None, 2)
            .unwrap();
        partial.state(EmitTo::All).unwrap()
    }

    #[test]
    fn partial_states_that_fit_overflow_when_the_final_merges_them() {
        // Two partial aggregates, each exact; the final's merge passes the top.
        let partials = [
            partial_state(vec![Some(i64::MAX - 1), Some(5)]),
            partial_state(vec![Some(1), None]),
        ];
        let mut exact = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        for state in &partials {
            exact.merge_batch(state, &[0, 1], 2).unwrap();
        }
        assert_eq!(
            sums_of(&exact.evaluate(EmitTo::All).unwrap()),
            vec![Some(i64::MAX), Some(5)]
        );

        let mut past = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        for state in &partials {
            past.merge_batch(state, &[0, 1], 2).unwrap();
        }
        past.merge_batch(&partial_state(vec![Some(1), None]), &[0, 1], 2)
            .unwrap();
        assert!(overflows(past.evaluate(EmitTo::All)));
    }

    #[test]
    fn a_partial_state_that_left_int64_carries_its_wrap_count_and_only_the_total_decides() {
        // Partition A: group 0 sums past the top, group 1 past the bottom. Partition B:
        // group 0 comes back within range, group 1 does not.
        let a = partial_state(vec![
            Some(i64::MAX),
            Some(i64::MIN),
            Some(i64::MAX),
            Some(-1),
        ]);
        assert_eq!(sums_of(&a[0]), vec![Some(-2), Some(i64::MAX)]);
        assert_eq!(sums_of(&a[1]), vec![Some(1), Some(-1)]);
        let b = partial_state(vec![Some(i64::MIN), Some(-5), Some(-9), None]);
        let mut total = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        total.merge_batch(&a, &[0, 1], 2).unwrap();
        total.merge_batch(&b, &[0, 1], 2).unwrap();
        // Group 0: 2·(2^63 − 1) − 2^63 − 9 = 2^63 − 11, exact.
        assert_eq!(
            sums_of(&total.evaluate(EmitTo::First(1)).unwrap()),
            vec![Some(i64::MAX - 10)]
        );
        // Group 1: −2^63 − 1 − 5 leaves Int64.
        assert!(overflows(total.evaluate(EmitTo::All)));
    }

    #[test]
    fn a_decimal_38_sum_past_its_digits_or_an_i128_is_an_error_only_when_finished() {
        let dt = DataType::Decimal128(38, 0);
        let decimals = |value: i128| -> ArrayRef {
            Arc::new(
                Decimal128Array::from(vec![Some(value); 2])
                    .with_precision_and_scale(38, 0)
                    .unwrap(),
            )
        };
        let finish = |values: ArrayRef| {
            let mut partial = SumGroupsAccumulator::<Decimal128Type>::new(&dt);
            partial.update_batch(&[values], &[0, 0], None, 1).unwrap();
            let state = partial.state(EmitTo::All).unwrap();
            let mut final_ = SumGroupsAccumulator::<Decimal128Type>::new(&dt);
            final_.merge_batch(&state, &[0], 1).unwrap();
            (state, final_.evaluate(EmitTo::All))
        };
        // 1.2·10^38 fits an i128 but not 38 digits: a partial state may carry it, the
        // final result may not.
        let big = 6 * 10i128.pow(37);
        let (state, result) = finish(decimals(big));
        assert_eq!(state[0].as_primitive::<Decimal128Type>().value(0), 2 * big);
        assert_eq!(sums_of(&state[1]), vec![Some(0)]);
        let err = result.unwrap_err().to_string();
        assert!(
            err.contains("SUM over Decimal128(38, 0) exceeds its range"),
            "{err}"
        );

        // Past an i128: the state carries the wrapped sum and one wrap of 2^128.
        let huge = 9 * 10i128.pow(37);
        let (state, result) = finish(decimals(huge));
        assert_eq!(
            state[0].as_primitive::<Decimal128Type>().value(0),
            (2 * huge as u128) as i128
        );
        assert_eq!(sums_of(&state[1]), vec![Some(1)]);
        assert!(result.is_err());
    }

    #[test]
    fn rows_converted_to_states_keep_their_values_with_nulls_for_filtered_rows() {
        let acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(1), None, Some(i64::MAX), Some(4)]);
        let filter = BooleanArray::from(vec![Some(true), Some(true), None, Some(false)]);
        let states = acc.convert_to_state(&[values], Some(&filter)).unwrap();
        assert_eq!(sums_of(&states[0]), vec![Some(1), None, None, None]);
        assert_eq!(sums_of(&states[1]), vec![Some(0); 4]);
    }
}
