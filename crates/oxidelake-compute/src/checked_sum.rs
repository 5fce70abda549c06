//! `sum` that raises an error on overflow, registered in place of DataFusion's on every
//! session OxideLake creates (embedded sessions, cluster clients, the scheduler and the
//! executors' function registry).
//!
//! DataFusion 55's `sum` adds integers and decimals with `add_wrapping`, in its
//! `Accumulator` and in its grouped `PrimitiveGroupsAccumulator`: two positive
//! `DECIMAL(38,0)` values can sum to a negative number, and a sum past `i64::MAX` comes
//! back negative, without a word. OxideLake's decision (docs/sql-semantics.md): a SUM
//! over integers or decimals whose result does not fit its type is an error,
//! `Arithmetic overflow: SUM over Int64 exceeds its range`, as DuckDB raises for
//! `DECIMAL(38)` and PostgreSQL for `bigint` arithmetic. The SUM itself never wraps: no
//! addition it makes returns a wrapped value. Its argument is another matter: DataFusion's
//! integer `*`, `+` and `-` wrap, so a SUM over an integer expression whose products or
//! sums already wrapped (`SUM(l_orderkey * 10000000000000)`) adds the wrapped values it
//! is given, exactly, and its result is their sum, not the true one.
//!
//! [`CheckedSum`] is DataFusion's [`Sum`] with other accumulators: the same name,
//! signature and return type, so plans keep their shape, Ballista's codec (which resolves
//! aggregates by name on the scheduler and the executors) finds it, and the placement
//! rule recognises it as `sum`. Its accumulators add with a *wrap count*:
//!
//! ```text
//!   running sum   w  (wrapping addition in the sum's type, as DataFusion's)
//!   wrap count    k  (+1 each time an addition passes the top of the range, −1 the bottom)
//!   true sum   =  w + k · 2^bits        fits the type  ⇔  k = 0
//! ```
//!
//! so a sum is exact or an error, whatever the order of its values, and a window frame
//! can retract values with the same bookkeeping.
//!
//! **Only the final result can overflow.** A partial aggregate's state carries both
//! numbers: DataFusion's state field (the wrapped sum, of the result's type) and a second
//! one, `wraps` (Int64: `k`, in units of 2^bits of the sum's native integer, 2^64 for
//! Int64, UInt64 and durations, 2^128 for Decimal128, 2^256 for Decimal256). The final
//! aggregate adds the wrapped sums with the same counting addition and the states' counts
//! to its own, so the total it finishes is exact however the rows were partitioned and
//! whichever placement made the states: the device partial aggregate emits this layout
//! too (`partial_aggregate`). A partial sum of values near both ends of the range may
//! leave it; only the total decides. A result whose count is not 0 is the error, and a
//! finished decimal must also fit its precision: `DECIMAL(38)` holds 38 digits, not the
//! 39 an i128 can (a state's wrapped sum may hold more).
//!
//! ```text
//!   partial (per partition)          final
//!   update: w += v, k += wraps       merge: w += w_i, k += wraps + k_i
//!   state:  [w, k]  ───────────────▶ evaluate: k = 0 and w fits ? w : overflow error
//! ```
//!
//! Float sums (they reach ±inf and do not wrap) and intervals keep DataFusion's
//! accumulators and its one-field state ([`sum_state_counts_wraps`] says which). So does
//! `SUM(DISTINCT x)`'s state: the list of distinct values, which carries no partial sum
//! (they are added, checked, when finished), and `SUM(DISTINCT x)` over a window frame
//! keeps DataFusion's sliding distinct sum (Int64 only).

mod accumulators;
mod groups;
mod wrapping;

use std::sync::{Arc, LazyLock};

use arrow::array::{Array, ArrayRef, ArrowPrimitiveType, AsArray, Int64Array, PrimitiveArray};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{
    DataType, Decimal32Type, Decimal64Type, Decimal128Type, Decimal256Type,
    DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    Field, FieldRef, Int64Type, TimeUnit, UInt64Type,
};
use datafusion::common::{Result, ScalarValue, exec_datafusion_err, internal_datafusion_err};
use datafusion::error::DataFusionError;
use datafusion::functions_aggregate::sum::Sum;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::utils::{AggregateOrderSensitivity, format_state_name};
use datafusion::logical_expr::{
    Accumulator, AggregateUDF, AggregateUDFImpl, Documentation, Expr, GroupsAccumulator,
    ReversedUDAF, SetMonotonicity, Signature, StatisticsArgs,
};

use accumulators::{DistinctSumAccumulator, SlidingSumAccumulator, SumAccumulator};
use groups::SumGroupsAccumulator;
pub(crate) use wrapping::WrappingSum;

/// The error of a SUM whose result leaves `data_type` (the sum's type: `Int64`,
/// `Decimal128(38, 0)`, ...). Only a final result raises it, on every placement: partial
/// states carry their wrap counts to the final aggregate (see the module docs).
pub fn sum_overflow_error(data_type: &DataType) -> DataFusionError {
    exec_datafusion_err!("Arithmetic overflow: SUM over {data_type} exceeds its range")
}

/// `sum(expr)` with OxideLake's overflow checks, for DataFrame code (DataFusion's
/// `expr_fn::sum` builds its own wrapping `sum`, whatever the session registered).
pub fn checked_sum(expr: Expr) -> Expr {
    checked_sum_udaf().call(vec![expr])
}

/// The `sum` aggregate function every OxideLake session registers (see the module docs).
pub fn checked_sum_udaf() -> Arc<AggregateUDF> {
    static SUM: LazyLock<Arc<AggregateUDF>> =
        LazyLock::new(|| Arc::new(AggregateUDF::from(CheckedSum::default())));
    Arc::clone(&SUM)
}

/// The name of the second state field of a checked `sum`, after DataFusion's `sum`:
/// `sum(x)[wraps]`.
pub(crate) const WRAPS_STATE: &str = "wraps";

/// A `sum(x)[wraps]` state column of `rows` wrap counts of 0: the state of sums that
/// did not wrap (a row passed through as its own state, an exact device sum).
pub(crate) fn zero_wraps(rows: usize) -> Int64Array {
    Int64Array::new(ScalarBuffer::from(vec![0i64; rows]), None)
}

/// `Some($make!(T))` for the Arrow type `T` of a checked sum of type `$data_type`,
/// `None` for the types DataFusion's accumulators keep (floats, intervals).
macro_rules! checked_sum_type {
    ($data_type:expr, $make:ident) => {
        match $data_type {
            DataType::Int64 => Some($make!(Int64Type)),
            DataType::UInt64 => Some($make!(UInt64Type)),
            DataType::Decimal32(..) => Some($make!(Decimal32Type)),
            DataType::Decimal64(..) => Some($make!(Decimal64Type)),
            DataType::Decimal128(..) => Some($make!(Decimal128Type)),
            DataType::Decimal256(..) => Some($make!(Decimal256Type)),
            DataType::Duration(TimeUnit::Second) => Some($make!(DurationSecondType)),
            DataType::Duration(TimeUnit::Millisecond) => Some($make!(DurationMillisecondType)),
            DataType::Duration(TimeUnit::Microsecond) => Some($make!(DurationMicrosecondType)),
            DataType::Duration(TimeUnit::Nanosecond) => Some($make!(DurationNanosecondType)),
            _ => None,
        }
    };
}

/// Whether a `sum` whose result is of type `sum_type` runs OxideLake's checked
/// accumulators, whose state is two fields, the wrapped sum and its wrap count
/// (integers, durations, decimals). Floats and intervals keep DataFusion's accumulators
/// and its one-field state.
pub(crate) fn sum_state_counts_wraps(sum_type: &DataType) -> bool {
    macro_rules! checked {
        ($t:ty) => {
            ()
        };
    }
    checked_sum_type!(sum_type, checked).is_some()
}

/// Column `at` of `arrays` as a primitive array of `T`.
fn primitive<T: ArrowPrimitiveType>(arrays: &[ArrayRef], at: usize) -> Result<&PrimitiveArray<T>> {
    let array = arrays
        .get(at)
        .ok_or_else(|| internal_datafusion_err!("sum: no argument {at} of {}", arrays.len()))?;
    array.as_primitive_opt::<T>().ok_or_else(|| {
        internal_datafusion_err!(
            "sum: argument of type {} is not a {}",
            array.data_type(),
            T::DATA_TYPE
        )
    })
}

/// Calls `f` with each valid value of `values`, in row order: a pass over the values
/// alone when none is NULL, else over the valid rows.
#[inline]
fn for_each_valid<T: ArrowPrimitiveType>(values: &PrimitiveArray<T>, mut f: impl FnMut(T::Native)) {
    match values.nulls().filter(|nulls| nulls.null_count() > 0) {
        None => values.values().iter().copied().for_each(&mut f),
        Some(nulls) => nulls.valid_indices().for_each(|row| f(values.value(row))),
    }
}

/// DataFusion's `sum` with accumulators that raise an error on overflow (see the module
/// docs). Everything but the accumulators is DataFusion's [`Sum`], except the rewrite
/// of `SUM(x + literal)` into `SUM(x) + literal * COUNT(x)` (see
/// [`AggregateUDFImpl::simplify_expr_op_literal`] below).
#[derive(Debug, Default, PartialEq, Eq, Hash)]
pub struct CheckedSum {
    stock: Sum,
}

impl AggregateUDFImpl for CheckedSum {
    fn name(&self) -> &str {
        self.stock.name()
    }

    fn signature(&self) -> &Signature {
        self.stock.signature()
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.stock.return_type(arg_types)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        let data_type = args.return_type().clone();
        let checked = if args.is_distinct {
            macro_rules! make {
                ($t:ty) => {
                    Box::new(DistinctSumAccumulator::<$t>::new(&data_type)) as Box<dyn Accumulator>
                };
            }
            checked_sum_type!(&data_type, make)
        } else {
            macro_rules! make {
                ($t:ty) => {
                    Box::new(SumAccumulator::<$t>::new(&data_type)) as Box<dyn Accumulator>
                };
            }
            checked_sum_type!(&data_type, make)
        };
        match checked {
            Some(accumulator) => Ok(accumulator),
            None => self.stock.accumulator(args),
        }
    }

    /// DataFusion's state fields, then, for the checked types, the wrap count
    /// `sum(x)[wraps]` (see the module docs). DISTINCT keeps DataFusion's list of values.
    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        let counts_wraps = !args.is_distinct && sum_state_counts_wraps(args.return_type());
        let wraps = format_state_name(args.name, WRAPS_STATE);
        let mut fields = self.stock.state_fields(args)?;
        if counts_wraps {
            fields.push(Arc::new(Field::new(wraps, DataType::Int64, false)));
        }
        Ok(fields)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.stock.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        let data_type = args.return_type().clone();
        macro_rules! make {
            ($t:ty) => {
                Box::new(SumGroupsAccumulator::<$t>::new(&data_type)) as Box<dyn GroupsAccumulator>
            };
        }
        match checked_sum_type!(&data_type, make) {
            Some(accumulator) => Ok(accumulator),
            None => self.stock.create_groups_accumulator(args),
        }
    }

    fn create_sliding_accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        if args.is_distinct {
            return self.stock.create_sliding_accumulator(args);
        }
        let data_type = args.return_type().clone();
        macro_rules! make {
            ($t:ty) => {
                Box::new(SlidingSumAccumulator::<$t>::new(&data_type)) as Box<dyn Accumulator>
            };
        }
        match checked_sum_type!(&data_type, make) {
            Some(accumulator) => Ok(accumulator),
            None => self.stock.create_sliding_accumulator(args),
        }
    }

    fn reverse_expr(&self) -> ReversedUDAF {
        self.stock.reverse_expr()
    }

    fn order_sensitivity(&self) -> AggregateOrderSensitivity {
        self.stock.order_sensitivity()
    }

    // `simplify_expr_op_literal` is left at its default (no rewrite): DataFusion's `sum`
    // rewrites `SUM(x + 1)` into `SUM(x) + 1 * COUNT(x)`, whose `+` wraps after the
    // checked sum (`SUM(x)` just under the top plus the count would come back negative).

    fn value_from_stats(&self, statistics_args: &StatisticsArgs) -> Option<ScalarValue> {
        // Exact statistics are summed with `add_checked`: an overflow leaves them absent.
        self.stock.value_from_stats(statistics_args)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.stock.documentation()
    }

    fn set_monotonicity(&self, data_type: &DataType) -> SetMonotonicity {
        self.stock.set_monotonicity(data_type)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checked_sum_keeps_datafusions_name_and_return_type_and_adds_a_wrap_count_to_its_state() {
        let ours = checked_sum_udaf();
        let stock = datafusion::functions_aggregate::sum::sum_udaf();
        assert_eq!(ours.name(), stock.name());
        assert_eq!(ours.aliases(), stock.aliases());
        for (input, counts_wraps) in [
            (DataType::Int64, true),
            (DataType::UInt64, true),
            (DataType::Float64, false),
            (DataType::Decimal128(12, 2), true),
            (DataType::Decimal128(38, 0), true),
        ] {
            let return_type = ours.return_type(std::slice::from_ref(&input)).unwrap();
            assert_eq!(
                return_type,
                stock.return_type(std::slice::from_ref(&input)).unwrap(),
                "{input}"
            );
            let input_fields: Vec<FieldRef> = vec![Arc::new(Field::new("x", input.clone(), true))];
            for is_distinct in [false, true] {
                let args = || StateFieldsArgs {
                    name: "sum(x)",
                    input_fields: &input_fields,
                    return_field: Arc::new(Field::new("sum(x)", return_type.clone(), true)),
                    ordering_fields: &[],
                    is_distinct,
                };
                let mut want = stock.state_fields(args()).unwrap();
                if counts_wraps && !is_distinct {
                    want.push(Arc::new(Field::new(
                        "sum(x)[wraps]",
                        DataType::Int64,
                        false,
                    )));
                }
                assert_eq!(
                    ours.state_fields(args()).unwrap(),
                    want,
                    "{input}, distinct: {is_distinct}"
                );
            }
        }
        assert_eq!(ours.signature(), stock.signature());
    }

    #[test]
    fn the_overflow_error_names_the_function_and_the_type() {
        let err = sum_overflow_error(&DataType::Int64).to_string();
        assert!(
            err.contains("Arithmetic overflow: SUM over Int64 exceeds its range"),
            "{err}"
        );
        let err = sum_overflow_error(&DataType::Decimal128(38, 0)).to_string();
        assert!(
            err.contains("SUM over Decimal128(38, 0) exceeds its range"),
            "{err}"
        );
    }
}
