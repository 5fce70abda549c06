//! The checked `sum`'s accumulators for one group: a whole input (an aggregate without
//! GROUP BY), a window frame (values added and retracted), and `SUM(DISTINCT x)`.
//! Each keeps a wrap count beside its sum, and the first two hand it on in their state
//! (see the module docs of `checked_sum`); only `evaluate` checks it.

use std::collections::HashSet;
use std::fmt;
use std::mem::{size_of, size_of_val};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{DataType, Int64Type, UInt64Type};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{Result, ScalarValue, internal_datafusion_err};
use datafusion::logical_expr::Accumulator;

use super::wrapping::{
    SumType, WrappingSum, add_states, add_valid, finished_scalar, state_scalars,
};
use super::{for_each_valid, primitive};

/// The checked sum of every value it is given.
pub(super) struct SumAccumulator<T: SumType> {
    data_type: DataType,
    /// The wrapped sum; `None` before the first value.
    sum: Option<T::Native>,
    wraps: i64,
}

impl<T: SumType> SumAccumulator<T> {
    pub(super) fn new(data_type: &DataType) -> Self {
        Self {
            data_type: data_type.clone(),
            sum: None,
            wraps: 0,
        }
    }
}

impl<T: SumType> fmt::Debug for SumAccumulator<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SumAccumulator({}, checked)", self.data_type)
    }
}

impl<T: SumType> Accumulator for SumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = primitive::<T>(values, 0)?;
        let mut sum = self.sum.unwrap_or_else(T::default_value);
        if add_valid(values, &mut sum, &mut self.wraps) {
            self.sum = Some(sum);
        }
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        finished_scalar::<T>(self.sum, self.wraps, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    /// The wrapped sum and its wrap count, unchecked: only the final result can overflow.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        state_scalars::<T>(self.sum, self.wraps, &self.data_type)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (sums, wraps) = (
            primitive::<T>(states, 0)?,
            primitive::<Int64Type>(states, 1)?,
        );
        let mut sum = self.sum.unwrap_or_else(T::default_value);
        if add_states(sums, wraps, &mut sum, &mut self.wraps)? {
            self.sum = Some(sum);
        }
        Ok(())
    }
}

/// The checked sum of a window frame: values come in and go out (`retract_batch`). The
/// wrap count goes up and down with them, so the frame's sum is exact or an error
/// whatever passed through it before.
pub(super) struct SlidingSumAccumulator<T: SumType> {
    data_type: DataType,
    sum: T::Native,
    wraps: i64,
    /// Values in the frame (NULL without any).
    count: u64,
}

impl<T: SumType> SlidingSumAccumulator<T> {
    pub(super) fn new(data_type: &DataType) -> Self {
        Self {
            data_type: data_type.clone(),
            sum: T::default_value(),
            wraps: 0,
            count: 0,
        }
    }

    /// The frame's wrapped sum, NULL without values.
    fn frame_sum(&self) -> Option<T::Native> {
        (self.count > 0).then_some(self.sum)
    }
}

impl<T: SumType> fmt::Debug for SlidingSumAccumulator<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SlidingSumAccumulator({}, checked)", self.data_type)
    }
}

impl<T: SumType> Accumulator for SlidingSumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = primitive::<T>(values, 0)?;
        self.count += (values.len() - values.null_count()) as u64;
        add_valid(values, &mut self.sum, &mut self.wraps);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        finished_scalar::<T>(self.frame_sum(), self.wraps, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    /// The checked `sum`'s state (the wrapped sum and its wrap count), then the count of
    /// values in the frame, as DataFusion's sliding sum appends its count to its state.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let mut state = state_scalars::<T>(self.frame_sum(), self.wraps, &self.data_type)?;
        state.push(ScalarValue::from(self.count));
        Ok(state)
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let (sums, wraps) = (
            primitive::<T>(states, 0)?,
            primitive::<Int64Type>(states, 1)?,
        );
        add_states(sums, wraps, &mut self.sum, &mut self.wraps)?;
        let counts = primitive::<UInt64Type>(states, 2)?;
        self.count += arrow::compute::sum(counts).unwrap_or(0);
        Ok(())
    }

    fn retract_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = primitive::<T>(values, 0)?;
        let valid = (values.len() - values.null_count()) as u64;
        self.count = self.count.checked_sub(valid).ok_or_else(|| {
            internal_datafusion_err!(
                "sum: {valid} values retracted from a frame of {}",
                self.count
            )
        })?;
        for_each_valid(values, |value| {
            let (next, wrapped) = self.sum.sub_counting(value);
            self.sum = next;
            self.wraps += wrapped;
        });
        Ok(())
    }

    fn supports_retract_batch(&self) -> bool {
        true
    }
}

/// The checked sum of the distinct values it is given. The state is the list of those
/// values, as DataFusion's `SUM(DISTINCT)` keeps it; they are summed when finished.
pub(super) struct DistinctSumAccumulator<T: SumType> {
    data_type: DataType,
    values: HashSet<T::Native>,
}

impl<T: SumType> DistinctSumAccumulator<T> {
    pub(super) fn new(data_type: &DataType) -> Self {
        Self {
            data_type: data_type.clone(),
            values: HashSet::new(),
        }
    }

    fn insert_valid(&mut self, values: &PrimitiveArray<T>) {
        for_each_valid(values, |value| {
            self.values.insert(value);
        });
    }
}

impl<T: SumType> fmt::Debug for DistinctSumAccumulator<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "DistinctSumAccumulator({}, {} values, checked)",
            self.data_type,
            self.values.len()
        )
    }
}

impl<T: SumType> Accumulator for DistinctSumAccumulator<T> {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let values = primitive::<T>(values, 0)?;
        self.insert_valid(values);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        let mut sum = T::default_value();
        let mut wraps = 0;
        for value in &self.values {
            let (next, wrapped) = sum.add_counting(*value);
            sum = next;
            wraps += wrapped;
        }
        let sum = (!self.values.is_empty()).then_some(sum);
        finished_scalar::<T>(sum, wraps, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.values.capacity() * size_of::<T::Native>()
    }

    /// The distinct values as a one-row list (the state field DataFusion's `sum`
    /// declares for DISTINCT: a list of the sum's type). It holds values, not a partial
    /// sum, so it needs no wrap count: they are added, and checked, when finished.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        let values = PrimitiveArray::<T>::from_iter_values(self.values.iter().copied())
            .with_data_type(self.data_type.clone());
        Ok(vec![
            SingleRowListArrayBuilder::new(Arc::new(values)).build_list_scalar(),
        ])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let lists = states
            .first()
            .and_then(|s| s.as_list_opt::<i32>())
            .ok_or_else(|| internal_datafusion_err!("sum(DISTINCT): the state is not a list"))?;
        for list in lists.iter().flatten() {
            self.update_batch(&[list])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::Int64Array;
    use arrow::datatypes::Int64Type;

    use super::*;

    fn int64s(values: Vec<Option<i64>>) -> ArrayRef {
        Arc::new(Int64Array::from(values))
    }

    fn overflows(result: Result<impl Sized>) -> bool {
        result.is_err_and(|e| {
            e.to_string()
                .contains("Arithmetic overflow: SUM over Int64 exceeds its range")
        })
    }

    #[test]
    fn a_sum_without_groups_past_i64_max_is_an_error_and_nulls_add_nothing() {
        let mut acc = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.update_batch(&[int64s(vec![Some(i64::MAX), None])])
            .unwrap();
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MAX)));
        acc.update_batch(&[int64s(vec![Some(1)])]).unwrap();
        assert!(overflows(acc.evaluate()));
        // The state is no error: the wrapped sum and how often it wrapped.
        assert_eq!(
            acc.state().unwrap(),
            [
                ScalarValue::Int64(Some(i64::MIN)),
                ScalarValue::Int64(Some(1))
            ]
        );

        let mut nothing = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        nothing.update_batch(&[int64s(vec![None, None])]).unwrap();
        assert_eq!(nothing.evaluate().unwrap(), ScalarValue::Int64(None));
    }

    #[test]
    fn merged_states_past_i64_max_are_an_error() {
        let mut acc = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.merge_batch(&[
            int64s(vec![Some(i64::MAX), Some(i64::MAX), None]),
            int64s(vec![Some(0), Some(0), Some(0)]),
        ])
        .unwrap();
        assert!(overflows(acc.evaluate()));
    }

    #[test]
    fn partial_sums_that_left_int64_merge_into_the_exact_total() {
        // Two partitions: one sums two values near the top, the other two near the
        // bottom. Each partial sum leaves Int64; the total, -4, fits.
        let mut states = Vec::new();
        for values in [
            vec![Some(i64::MAX), Some(i64::MAX), Some(1)],
            vec![Some(i64::MIN), None, Some(i64::MIN), Some(-3)],
        ] {
            let mut partial = SumAccumulator::<Int64Type>::new(&DataType::Int64);
            partial.update_batch(&[int64s(values)]).unwrap();
            assert!(overflows(partial.evaluate()), "the partial alone overflows");
            states.push(partial.state().unwrap());
        }
        assert_eq!(states[0][1], ScalarValue::Int64(Some(1)));
        assert_eq!(states[1][1], ScalarValue::Int64(Some(-1)));
        let mut total = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        for state in &states {
            let columns: Vec<ArrayRef> = state.iter().map(|s| s.to_array().unwrap()).collect();
            total.merge_batch(&columns).unwrap();
        }
        assert_eq!(total.evaluate().unwrap(), ScalarValue::Int64(Some(-4)));
    }

    #[test]
    fn a_window_frame_that_passed_the_top_and_came_back_is_exact() {
        let mut acc = SlidingSumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.update_batch(&[int64s(vec![Some(i64::MAX), Some(5)])])
            .unwrap();
        assert!(overflows(acc.evaluate()));
        assert_eq!(
            acc.state().unwrap(),
            [
                ScalarValue::Int64(Some(i64::MIN + 4)),
                ScalarValue::Int64(Some(1)),
                ScalarValue::UInt64(Some(2))
            ]
        );
        acc.retract_batch(&[int64s(vec![Some(i64::MAX)])]).unwrap();
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Int64(Some(5)));
        acc.retract_batch(&[int64s(vec![Some(5), None])]).unwrap();
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Int64(None));
    }

    #[test]
    fn a_distinct_sum_counts_each_value_once_and_overflows_only_past_the_range() {
        let mut acc = DistinctSumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.update_batch(&[int64s(vec![Some(i64::MAX), Some(i64::MAX), None])])
            .unwrap();
        assert_eq!(acc.evaluate().unwrap(), ScalarValue::Int64(Some(i64::MAX)));
        // Through the state, as a final aggregate merges it.
        let state = acc.state().unwrap();
        let mut merged = DistinctSumAccumulator::<Int64Type>::new(&DataType::Int64);
        merged.merge_batch(&[state[0].to_array().unwrap()]).unwrap();
        merged.update_batch(&[int64s(vec![Some(1)])]).unwrap();
        assert!(overflows(merged.evaluate()));
    }
}
