//! The grouped accumulator of the checked `sum`: DataFusion's `PrimitiveGroupsAccumulator`
//! loop (one wrapping addition per row into the group's sum, NULLs and filters through
//! DataFusion's `NullState`) plus a wrap count per group, checked when states or results
//! are emitted.

use std::mem::size_of;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, PrimitiveArray};
use arrow::buffer::NullBuffer;
use arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{EmitTo, GroupsAccumulator};
use datafusion::physical_expr::NullState;

use super::{SumType, WrappingSum, primitive, sum_overflow_error};

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

    /// The sums of the groups `emit_to` names, NULL for a group without values; the
    /// overflow error when one of them wrapped or, `finished`, when a decimal's precision
    /// does not hold it. A group without values has a sum of 0 and no wraps, so every
    /// slot can be checked without its validity.
    fn emit(&mut self, emit_to: EmitTo, finished: bool) -> Result<ArrayRef> {
        let sums = emit_to.take_needed(&mut self.sums);
        let wraps = emit_to.take_needed(&mut self.wraps);
        let nulls = self.null_state.build(emit_to);
        let wrapped = wraps.iter().any(|w| *w != 0);
        if wrapped || (finished && !sums.iter().all(|s| T::holds(*s, &self.data_type))) {
            return Err(sum_overflow_error(&self.data_type));
        }
        let sums =
            PrimitiveArray::<T>::new(sums.into(), nulls).with_data_type(self.data_type.clone());
        Ok(Arc::new(sums))
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

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        self.emit(emit_to, true)
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        Ok(vec![self.emit(emit_to, false)?])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        // A state is a sum: merging adds, with the same wrap count.
        let sums = primitive::<T>(values, 0)?;
        self.add(sums, group_indices, None, total_num_groups);
        Ok(())
    }

    /// Each row as its own state: its value, NULL where the value is NULL or the filter
    /// is not true (no addition, so nothing to check).
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
        Ok(vec![Arc::new(states)])
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

    #[test]
    fn partial_states_that_fit_overflow_when_the_final_merges_them() {
        // Two partial aggregates, each exact; the final's merge passes the top.
        let mut partials: Vec<ArrayRef> = Vec::new();
        for values in [vec![Some(i64::MAX - 1), Some(5)], vec![Some(1), None]] {
            let mut partial = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
            partial
                .update_batch(&[int64s(values)], &[0, 1], None, 2)
                .unwrap();
            partials.extend(partial.state(EmitTo::All).unwrap());
        }
        let mut exact = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        exact.merge_batch(&partials[..1], &[0, 1], 2).unwrap();
        exact.merge_batch(&partials[1..], &[0, 1], 2).unwrap();
        assert_eq!(
            sums_of(&exact.evaluate(EmitTo::All).unwrap()),
            vec![Some(i64::MAX), Some(5)]
        );

        let mut past = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        for state in &partials {
            past.merge_batch(std::slice::from_ref(state), &[0, 1], 2)
                .unwrap();
        }
        past.merge_batch(&[int64s(vec![Some(1), None])], &[0, 1], 2)
            .unwrap();
        assert!(overflows(past.evaluate(EmitTo::All)));
    }

    #[test]
    fn a_partial_state_that_wrapped_is_an_error_not_a_wrapped_state() {
        let mut partial = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(i64::MIN), Some(-1)]);
        partial.update_batch(&[values], &[0, 0], None, 1).unwrap();
        assert!(overflows(partial.state(EmitTo::All)));
    }

    #[test]
    fn a_decimal_38_sum_past_38_digits_is_an_error_when_finished_not_in_a_partial_state() {
        let dt = DataType::Decimal128(38, 0);
        let big = 6 * 10i128.pow(37);
        let values: ArrayRef = Arc::new(
            Decimal128Array::from(vec![Some(big), Some(big)])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        // 1.2·10^38 fits an i128 but not 38 digits: a partial state may carry it, the
        // final result may not.
        let mut partial = SumGroupsAccumulator::<Decimal128Type>::new(&dt);
        partial
            .update_batch(&[Arc::clone(&values)], &[0, 0], None, 1)
            .unwrap();
        let state = partial.state(EmitTo::All).unwrap();
        assert_eq!(state[0].as_primitive::<Decimal128Type>().value(0), 2 * big);
        let mut final_ = SumGroupsAccumulator::<Decimal128Type>::new(&dt);
        final_.merge_batch(&state, &[0], 1).unwrap();
        let err = final_.evaluate(EmitTo::All).unwrap_err().to_string();
        assert!(
            err.contains("SUM over Decimal128(38, 0) exceeds its range"),
            "{err}"
        );

        // Past an i128: the partial state itself is the error.
        let huge: ArrayRef = Arc::new(
            Decimal128Array::from(vec![Some(9 * 10i128.pow(37)); 2])
                .with_precision_and_scale(38, 0)
                .unwrap(),
        );
        let mut partial = SumGroupsAccumulator::<Decimal128Type>::new(&dt);
        partial.update_batch(&[huge], &[0, 0], None, 1).unwrap();
        assert!(partial.state(EmitTo::All).is_err());
    }

    #[test]
    fn rows_converted_to_states_keep_their_values_with_nulls_for_filtered_rows() {
        let acc = SumGroupsAccumulator::<Int64Type>::new(&DataType::Int64);
        let values = int64s(vec![Some(1), None, Some(i64::MAX), Some(4)]);
        let filter = BooleanArray::from(vec![Some(true), Some(true), None, Some(false)]);
        let states = acc.convert_to_state(&[values], Some(&filter)).unwrap();
        assert_eq!(sums_of(&states[0]), vec![Some(1), None, None, None]);
    }
}
