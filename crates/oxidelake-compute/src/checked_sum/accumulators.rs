//! The checked `sum`'s accumulators for one group: a whole input (an aggregate without
//! GROUP BY), a window frame (values added and retracted), and `SUM(DISTINCT x)`.
//! Each keeps a wrap count beside its sum (see the module docs of `checked_sum`).

use std::collections::HashSet;
use std::fmt;
use std::mem::{size_of, size_of_val};
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, PrimitiveArray};
use arrow::datatypes::{DataType, UInt64Type};
use datafusion::common::utils::SingleRowListArrayBuilder;
use datafusion::common::{Result, ScalarValue, internal_datafusion_err};
use datafusion::logical_expr::Accumulator;

use super::{SumType, WrappingSum, add_valid, checked_scalar, primitive};

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
        checked_scalar::<T>(self.sum, self.wraps, true, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![checked_scalar::<T>(
            self.sum,
            self.wraps,
            false,
            &self.data_type,
        )?])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.update_batch(states)
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

    fn frame_sum(&self, finished: bool) -> Result<ScalarValue> {
        let sum = (self.count > 0).then_some(self.sum);
        checked_scalar::<T>(sum, self.wraps, finished, &self.data_type)
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
        self.frame_sum(true)
    }

    fn size(&self) -> usize {
        size_of_val(self)
    }

    /// DataFusion's sliding sum's state: the sum, then the count.
    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(vec![self.frame_sum(false)?, ScalarValue::from(self.count)])
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        let sums = primitive::<T>(states, 0)?;
        add_valid(sums, &mut self.sum, &mut self.wraps);
        let counts = primitive::<UInt64Type>(states, 1)?;
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
        let mut subtract = |value: T::Native| {
            let (next, wrapped) = self.sum.sub_counting(value);
            self.sum = next;
            self.wraps += wrapped;
        };
        match values.nulls().filter(|nulls| nulls.null_count() > 0) {
            None => values.values().iter().copied().for_each(&mut subtract),
            Some(nulls) => nulls
                .valid_indices()
                .for_each(|row| subtract(values.value(row))),
        }
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
        match values.nulls().filter(|nulls| nulls.null_count() > 0) {
            None => self.values.extend(values.values().iter().copied()),
            Some(nulls) => self
                .values
                .extend(nulls.valid_indices().map(|row| values.value(row))),
        }
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
        checked_scalar::<T>(sum, wraps, true, &self.data_type)
    }

    fn size(&self) -> usize {
        size_of_val(self) + self.values.capacity() * size_of::<T::Native>()
    }

    /// The distinct values as a one-row list (the state field DataFusion's `sum`
    /// declares for DISTINCT: a list of the sum's type).
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
        assert!(overflows(acc.state()));

        let mut nothing = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        nothing.update_batch(&[int64s(vec![None, None])]).unwrap();
        assert_eq!(nothing.evaluate().unwrap(), ScalarValue::Int64(None));
    }

    #[test]
    fn merged_states_past_i64_max_are_an_error() {
        let mut acc = SumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.merge_batch(&[int64s(vec![Some(i64::MAX), Some(i64::MAX), None])])
            .unwrap();
        assert!(overflows(acc.evaluate()));
    }

    #[test]
    fn a_window_frame_that_passed_the_top_and_came_back_is_exact() {
        let mut acc = SlidingSumAccumulator::<Int64Type>::new(&DataType::Int64);
        acc.update_batch(&[int64s(vec![Some(i64::MAX), Some(5)])])
            .unwrap();
        assert!(overflows(acc.evaluate()));
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
