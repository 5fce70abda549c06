//! `min` and `max` that order floats one way on every path: IEEE total order, as
//! DataFusion's ungrouped MIN/MAX, its window MIN/MAX and the device's MIN/MAX do
//! (`-0.0` below `+0.0`, NaN above `+inf`, a negative NaN below `-inf`, and NULLs
//! ignored).
//!
//! DataFusion 55.2's *grouped* MIN/MAX over Float16/32/64 (`PrimitiveGroupsAccumulator`
//! with the `primitive_min_accumulator!` / `primitive_max_accumulator!` closures in
//! `datafusion-functions-aggregate`'s `min_max.rs`) disagree with all of those:
//!
//! - the closures compare with `partial_cmp` and take the new value when it returns
//!   `None`, so once a group holds NaN *any* next value replaces it, and a NaN replaces
//!   any value: the result depends on row order (`max(NaN, 2.0, -3.0)` is 2.0 where the
//!   ungrouped MAX is NaN; `min` over `-inf`s, then a NaN, then `-0.0` is `-0.0`);
//! - a group starts at `f64::MAX` (MIN) or `f64::MIN` (MAX), the largest finite values,
//!   not the identities: MAX over a group of `-inf`s is `-1.7976931348623157e308`.
//!
//! (`docs/upstream-defects.md` has the reproduction and the fix proposed upstream.) The
//! functions here are DataFusion's, delegated to in everything, except that a grouped
//! MIN/MAX over a float type accumulates in total order from the total-order identities,
//! and that a float MIN/MAX is never answered from file statistics: Parquet leaves NaN out
//! of its min/max statistics, so they cannot say that the MAX is NaN. Sessions,
//! schedulers and executors register them under DataFusion's names, so every plan,
//! placed for any backend, uses them.

use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, AsArray, BooleanArray, PrimitiveArray};
use arrow::buffer::{NullBuffer, ScalarBuffer};
use arrow::datatypes::{
    ArrowNativeTypeOp, ArrowPrimitiveType, DataType, Float16Type, Float32Type, Float64Type,
};
use datafusion::common::{Result, ScalarValue, internal_err};
use datafusion::functions_aggregate::min_max::{Max, Min};
use datafusion::logical_expr::function::AccumulatorArgs;
use datafusion::logical_expr::utils::AggregateOrderSensitivity;
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, EmitTo, Expr, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};
use datafusion::physical_expr::NullState;

/// DataFusion's `min` and `max`, with grouped float accumulation in IEEE total order
/// (see the module docs), named as DataFusion names them so that registering them
/// replaces DataFusion's.
pub fn total_order_min_max_udafs() -> Vec<Arc<AggregateUDF>> {
    vec![Arc::clone(&MIN), Arc::clone(&MAX)]
}

/// `min(expr)` with these functions, for DataFrame code (DataFusion's `expr_fn::min`
/// builds its own `min`, whatever the session registered).
pub fn total_order_min(expr: Expr) -> Expr {
    MIN.call(vec![expr])
}

/// `max(expr)` with these functions, for DataFrame code (see [`total_order_min`]).
pub fn total_order_max(expr: Expr) -> Expr {
    MAX.call(vec![expr])
}

static MIN: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::from(TotalOrderMinMax::min())));
static MAX: LazyLock<Arc<AggregateUDF>> =
    LazyLock::new(|| Arc::new(AggregateUDF::from(TotalOrderMinMax::max())));

/// DataFusion's `min` or `max`, whose grouped accumulator over floats orders them in
/// IEEE total order, like its ungrouped one.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct TotalOrderMinMax {
    stock: Stock,
}

/// The DataFusion function delegated to.
#[derive(Debug, PartialEq, Eq, Hash)]
enum Stock {
    Min(Min),
    Max(Max),
}

impl TotalOrderMinMax {
    /// `min`.
    pub fn min() -> Self {
        Self {
            stock: Stock::Min(Min::new()),
        }
    }

    /// `max`.
    pub fn max() -> Self {
        Self {
            stock: Stock::Max(Max::new()),
        }
    }

    fn stock(&self) -> &dyn AggregateUDFImpl {
        match &self.stock {
            Stock::Min(min) => min,
            Stock::Max(max) => max,
        }
    }

    fn is_max(&self) -> bool {
        matches!(self.stock, Stock::Max(_))
    }
}

fn is_float(data_type: &DataType) -> bool {
    matches!(
        data_type,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    )
}

impl AggregateUDFImpl for TotalOrderMinMax {
    fn name(&self) -> &str {
        self.stock().name()
    }

    fn aliases(&self) -> &[String] {
        self.stock().aliases()
    }

    fn signature(&self) -> &Signature {
        self.stock().signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.stock().return_type(arg_types)
    }

    fn accumulator(&self, acc_args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.stock().accumulator(acc_args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.stock().groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let data_type = args.return_field.data_type().clone();
        let max = self.is_max();
        let accumulator: Box<dyn GroupsAccumulator> = match data_type {
            DataType::Float16 => Box::new(TotalOrderGroups::<Float16Type>::new(data_type, max)),
            DataType::Float32 => Box::new(TotalOrderGroups::<Float32Type>::new(data_type, max)),
            DataType::Float64 => Box::new(TotalOrderGroups::<Float64Type>::new(data_type, max)),
            _ => return self.stock().create_groups_accumulator(args),
        };
        Ok(accumulator)
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.stock().create_sliding_accumulator(args)
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.stock().order_sensitivity()
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.stock().reverse_expr()
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.stock().coerce_types(arg_types)
    }

    fn is_descending(&self) -> Option<bool> {
        self.stock().is_descending()
    }

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        // A file's float min/max statistics leave NaN out (Parquet's rule): a MAX over a
        // column holding NaN is NaN, which they cannot tell.
        if is_float(statistics_args.return_type) {
            return None;
        }
        self.stock().value_from_stats(statistics_args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.stock().documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.stock().set_monotonicity(data_type)
    }
}

/// MIN or MAX per group over one float type, in IEEE total order
/// (`ArrowNativeTypeOp::is_lt`, Arrow's `min`/`max` kernels' order). Each group starts at
/// the order's identity (`MAX_TOTAL_ORDER` for MIN, `MIN_TOTAL_ORDER` for MAX), so no
/// value is lost to a starting value, and NULL until a non-NULL value arrives.
struct TotalOrderGroups<T: ArrowPrimitiveType + Send> {
    /// Per group: the extreme so far.
    values: Vec<T::Native>,
    /// Which groups have seen a value (the result is NULL otherwise), with DataFusion's
    /// fast path for batches without NULLs or a filter.
    null_state: NullState,
    /// The result type (the input's).
    data_type: DataType,
    /// MAX rather than MIN.
    max: bool,
}

impl<T: ArrowPrimitiveType + Send> TotalOrderGroups<T> {
    fn new(data_type: DataType, max: bool) -> Self {
        Self {
            values: Vec::new(),
            null_state: NullState::new(),
            data_type,
            max,
        }
    }

    fn identity(&self) -> T::Native {
        if self.max {
            <T::Native as ArrowNativeTypeOp>::MIN_TOTAL_ORDER
        } else {
            <T::Native as ArrowNativeTypeOp>::MAX_TOTAL_ORDER
        }
    }

    /// Folds `values` (NULLs and the rows `filter` does not pass skipped) into the groups
    /// `group_indices` names, first growing to `total_num_groups` groups.
    fn fold(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        let (name, max) = (self.name(), self.max);
        let [values] = values else {
            return internal_err!("{name} takes one argument, got {}", values.len());
        };
        let Some(values) = values.as_primitive_opt::<T>() else {
            return internal_err!(
                "{name} over {} got {} values",
                self.data_type,
                values.data_type()
            );
        };
        if group_indices.len() != values.len() {
            return internal_err!(
                "{name}: {} group indices for {} values",
                group_indices.len(),
                values.len()
            );
        }
        let identity = self.identity();
        self.values.resize(total_num_groups, identity);
        let extremes = &mut self.values;
        // `group_indices` are below `total_num_groups` (the GroupsAccumulator contract;
        // DataFusion's own accumulators index on it the same way), and `extremes` was just
        // grown to that many groups.
        self.null_state.accumulate(
            group_indices,
            values,
            filter,
            total_num_groups,
            |group, value| {
                let current = &mut extremes[group];
                let better = if max {
                    value.is_gt(*current)
                } else {
                    value.is_lt(*current)
                };
                if better {
                    *current = value;
                }
            },
        );
        Ok(())
    }

    fn name(&self) -> &'static str {
        if self.max { "max" } else { "min" }
    }
}

impl<T: ArrowPrimitiveType + Send> GroupsAccumulator for TotalOrderGroups<T> {
    fn update_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        opt_filter: Option<&BooleanArray>,
        total_num_groups: usize,
    ) -> Result<()> {
        self.fold(values, group_indices, opt_filter, total_num_groups)
    }

    fn evaluate(&mut self, emit_to: EmitTo) -> Result<ArrayRef> {
        let values = emit_to.take_needed(&mut self.values);
        let nulls = self.null_state.build(emit_to);
        let array = PrimitiveArray::<T>::try_new(ScalarBuffer::from(values), nulls)?
            .with_data_type(self.data_type.clone());
        Ok(Arc::new(array))
    }

    fn state(&mut self, emit_to: EmitTo) -> Result<Vec<ArrayRef>> {
        // The state is the result so far, as in DataFusion's MIN/MAX.
        Ok(vec![self.evaluate(emit_to)?])
    }

    fn merge_batch(
        &mut self,
        values: &[ArrayRef],
        group_indices: &[usize],
        total_num_groups: usize,
    ) -> Result<()> {
        self.fold(values, group_indices, None, total_num_groups)
    }

    /// Each row as its own state: its value, NULL where it is NULL or filtered out.
    fn convert_to_state(
        &self,
        values: &[ArrayRef],
        opt_filter: Option<&BooleanArray>,
    ) -> Result<Vec<ArrayRef>> {
        let [values] = values else {
            return internal_err!("{} takes one argument, got {}", self.name(), values.len());
        };
        let Some(values) = values.as_primitive_opt::<T>() else {
            return internal_err!("{} over {}", self.name(), values.data_type());
        };
        let nulls = match opt_filter {
            None => values.nulls().cloned(),
            Some(filter) => {
                // A row the filter does not pass (false or NULL) has no value.
                let passes = match filter.nulls() {
                    Some(valid) => filter.values() & valid.inner(),
                    None => filter.values().clone(),
                };
                NullBuffer::union(values.nulls(), Some(&NullBuffer::from(passes)))
            }
        };
        let state = PrimitiveArray::<T>::try_new(values.values().clone(), nulls)?
            .with_data_type(self.data_type.clone());
        Ok(vec![Arc::new(state)])
    }

    fn size(&self) -> usize {
        self.values.capacity() * size_of::<T::Native>() + self.null_state.size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float32Array, Float64Array};

    fn groups(max: bool) -> TotalOrderGroups<Float64Type> {
        TotalOrderGroups::new(DataType::Float64, max)
    }

    fn floats(values: &[Option<f64>]) -> ArrayRef {
        Arc::new(Float64Array::from(values.to_vec()))
    }

    fn result(acc: &mut TotalOrderGroups<Float64Type>) -> Vec<Option<f64>> {
        let out = acc.evaluate(EmitTo::All).unwrap();
        out.as_primitive::<Float64Type>().iter().collect()
    }

    fn bits(values: &[Option<f64>]) -> Vec<Option<u64>> {
        values.iter().map(|v| v.map(f64::to_bits)).collect()
    }

    #[test]
    fn grouped_float_min_and_max_follow_total_order_whatever_the_row_order() {
        let nan = f64::NAN;
        let rows = [
            Some(nan),
            Some(2.0),
            Some(-3.0),
            None,
            Some(f64::NEG_INFINITY),
            Some(-0.0),
            Some(0.0),
        ];
        // Every rotation of the rows into one group gives the same answer.
        for start in 0..rows.len() {
            let rotated: Vec<Option<f64>> = rows[start..]
                .iter()
                .chain(&rows[..start])
                .copied()
                .collect();
            let indices = vec![0; rotated.len()];
            let mut min = groups(false);
            min.update_batch(&[floats(&rotated)], &indices, None, 1)
                .unwrap();
            assert_eq!(result(&mut min), [Some(f64::NEG_INFINITY)], "{rotated:?}");
            let mut max = groups(true);
            max.update_batch(&[floats(&rotated)], &indices, None, 1)
                .unwrap();
            assert!(result(&mut max)[0].is_some_and(f64::is_nan), "{rotated:?}");
        }
    }

    #[test]
    fn a_group_of_infinities_keeps_its_infinity_and_a_group_of_nulls_is_null() {
        let mut max = groups(true);
        let values = floats(&[Some(f64::NEG_INFINITY), None, Some(f64::INFINITY), None]);
        max.update_batch(&[Arc::clone(&values)], &[0, 1, 2, 0], None, 3)
            .unwrap();
        assert_eq!(
            result(&mut max),
            [Some(f64::NEG_INFINITY), None, Some(f64::INFINITY)]
        );
        let mut min = groups(false);
        min.update_batch(&[values], &[0, 1, 2, 0], None, 3).unwrap();
        assert_eq!(
            result(&mut min),
            [Some(f64::NEG_INFINITY), None, Some(f64::INFINITY)]
        );
    }

    #[test]
    fn signed_zeros_and_negative_nan_order_as_the_ungrouped_kernels_order_them() {
        let values = [Some(0.0), Some(-0.0), Some(-f64::NAN), Some(1.0)];
        let want_min = arrow::compute::min(&Float64Array::from(values.to_vec()));
        let want_max = arrow::compute::max(&Float64Array::from(values[..2].to_vec()));
        let mut min = groups(false);
        min.update_batch(&[floats(&values)], &[0, 0, 0, 0], None, 1)
            .unwrap();
        assert_eq!(bits(&result(&mut min)), bits(&[want_min]));
        assert!(result_is_negative_nan(want_min));
        let mut max = groups(true);
        max.update_batch(&[floats(&values[..2])], &[0, 0], None, 1)
            .unwrap();
        assert_eq!(bits(&result(&mut max)), bits(&[Some(0.0)]));
        assert_eq!(bits(&[want_max]), bits(&[Some(0.0)]));
    }

    fn result_is_negative_nan(v: Option<f64>) -> bool {
        v.is_some_and(|v| v.is_nan() && v.is_sign_negative())
    }

    #[test]
    fn filtered_rows_are_skipped_and_merging_states_keeps_the_order() {
        let mut min = groups(false);
        let filter = BooleanArray::from(vec![Some(true), Some(false), None, Some(true)]);
        min.update_batch(
            &[floats(&[Some(5.0), Some(-9.0), Some(-8.0), Some(f64::NAN)])],
            &[0, 0, 0, 1],
            Some(&filter),
            2,
        )
        .unwrap();
        let state = min.state(EmitTo::All).unwrap();
        let mut merged = groups(false);
        merged.merge_batch(&state, &[1, 0], 2).unwrap();
        merged
            .merge_batch(&[floats(&[Some(7.0), Some(3.0)])], &[0, 1], 2)
            .unwrap();
        assert_eq!(bits(&result(&mut merged)), bits(&[Some(7.0), Some(3.0)]));
    }

    #[test]
    fn each_row_converts_to_its_own_state_with_filtered_rows_null() {
        let min = TotalOrderGroups::<Float32Type>::new(DataType::Float32, false);
        let values: ArrayRef = Arc::new(Float32Array::from(vec![
            Some(1.0),
            None,
            Some(f32::INFINITY),
            Some(-2.0),
        ]));
        let filter = BooleanArray::from(vec![Some(true), Some(true), Some(true), None]);
        let state = min.convert_to_state(&[values], Some(&filter)).unwrap();
        let got: Vec<Option<f32>> = state[0].as_primitive::<Float32Type>().iter().collect();
        assert_eq!(got, [Some(1.0), None, Some(f32::INFINITY), None]);
    }

    #[test]
    fn emitting_the_first_groups_keeps_the_rest() {
        let mut max = groups(true);
        max.update_batch(
            &[floats(&[Some(1.0), Some(2.0), Some(3.0)])],
            &[0, 1, 2],
            None,
            3,
        )
        .unwrap();
        let first = max.evaluate(EmitTo::First(2)).unwrap();
        assert_eq!(
            first
                .as_primitive::<Float64Type>()
                .iter()
                .collect::<Vec<_>>(),
            [Some(1.0), Some(2.0)]
        );
        max.update_batch(&[floats(&[Some(0.5)])], &[0], None, 1)
            .unwrap();
        assert_eq!(result(&mut max), [Some(3.0)]);
    }

    #[test]
    fn dataframe_min_and_max_call_these_functions_not_datafusions() {
        use datafusion::logical_expr::col;
        for (expr, stock) in [
            (
                total_order_min(col("v")),
                datafusion::functions_aggregate::min_max::min_udaf(),
            ),
            (
                total_order_max(col("v")),
                datafusion::functions_aggregate::min_max::max_udaf(),
            ),
        ] {
            let call = match expr {
                Expr::AggregateFunction(call) => Some(call),
                _ => None,
            }
            .unwrap();
            assert_eq!(call.func.name(), stock.name());
            assert!(*call.func != *stock, "{} is DataFusion's", call.func.name());
            assert!(total_order_min_max_udafs().contains(&call.func));
        }
    }

    #[test]
    fn the_functions_keep_datafusions_names_and_grouped_support() {
        let names: Vec<String> = total_order_min_max_udafs()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        assert_eq!(names, ["min", "max"]);
        let stock = datafusion::functions_aggregate::min_max::min_udaf();
        assert_eq!(
            stock.signature(),
            total_order_min_max_udafs()[0].signature()
        );
    }
}
