//! `l2_distance(vector, query)`: the Euclidean distance between two numeric lists as a
//! SQL scalar function (ADR-0005).
//!
//! The numbers are DataFusion's `array_distance`'s to the last bit, and therefore those
//! of the CPU kernel behind `GpuVectorDistanceExec`: every element is widened to `f64`
//! (exact for `f32`), the squared differences are summed in element order, then
//! `sqrt`. Unlike `array_distance`, the arguments are not cast to `List<Float64>` first:
//! a `FixedSizeList<Float32>` column is read in place, and a literal query vector is
//! read once rather than broadcast to every row. `cosine_distance` is DataFusion's
//! built-in, whose semantics already match the operator's.
//!
//! | input | result |
//! |---|---|
//! | either row NULL, or a NULL element in either row | NULL |
//! | rows of different lengths | execution error |
//! | two empty rows | -0.0 (the empty f64 sum, as in `array_distance`) |

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, Float32Array, Float64Array};
use arrow::buffer::NullBuffer;
use arrow::datatypes::{DataType, Float32Type, Float64Type};
use datafusion::common::utils::take_function_args;
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};

/// The `l2_distance(vector, query)` scalar function: Float64, NULL for a NULL row.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct L2Distance {
    signature: Signature,
}

impl Default for L2Distance {
    fn default() -> Self {
        Self::new()
    }
}

impl L2Distance {
    /// The function, with its coercion rules.
    pub fn new() -> Self {
        Self {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// `l2_distance` as a `ScalarUDF`, to register on a session or function registry.
pub fn l2_distance_udf() -> ScalarUDF {
    ScalarUDF::new_from_impl(L2Distance::new())
}

impl ScalarUDFImpl for L2Distance {
    fn name(&self) -> &str {
        "l2_distance"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _arg_types: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    /// Lists of Float32 or Float64 stay as they are (any of FixedSizeList, List,
    /// LargeList, mixed freely); lists of other numbers become lists of Float64 (as
    /// `array_distance` casts them); an untyped NULL becomes a `List<Float64>`.
    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        let [_, _] = take_function_args(self.name(), arg_types)?;
        arg_types.iter().map(coerce_vector_type).collect()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let [a, b] = take_function_args(self.name(), &args.args)?;
        let scalar = |v: &ColumnarValue| matches!(v, ColumnarValue::Scalar(_));
        let both_scalar = scalar(a) && scalar(b);
        let rows = if both_scalar { 1 } else { args.number_rows };
        // A scalar is read as a one-row array and reused for every row.
        let (a, b) = (rows_of(a)?, rows_of(b)?);
        let (a, b) = (Vectors::try_new(&a)?, Vectors::try_new(&b)?);
        let out = (0..rows)
            .map(|i| l2_of_row(&a, &b, i))
            .collect::<Result<Float64Array>>()?;
        if both_scalar {
            return Ok(ColumnarValue::Scalar(ScalarValue::try_from_array(&out, 0)?));
        }
        Ok(ColumnarValue::Array(Arc::new(out)))
    }
}

fn coerce_vector_type(arg_type: &DataType) -> Result<DataType> {
    let float64_items = |field: &Arc<arrow::datatypes::Field>| {
        Arc::new(field.as_ref().clone().with_data_type(DataType::Float64))
    };
    match arg_type {
        DataType::Null => Ok(DataType::new_list(DataType::Float64, true)),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            match f.data_type() {
                DataType::Float32 | DataType::Float64 => Ok(arg_type.clone()),
                item if item.is_numeric() || item == &DataType::Null => Ok(match arg_type {
                    DataType::List(_) => DataType::List(float64_items(f)),
                    DataType::LargeList(_) => DataType::LargeList(float64_items(f)),
                    _ => DataType::FixedSizeList(float64_items(f), fixed_size(arg_type)),
                }),
                item => plan_err!(
                    "l2_distance takes one-dimensional lists of numbers, got a list of {item}"
                ),
            }
        }
        other => plan_err!(
            "l2_distance takes two lists of numbers (e.g. a FixedSizeList<Float32> column and a query vector), got {other}"
        ),
    }
}

fn fixed_size(t: &DataType) -> i32 {
    match t {
        DataType::FixedSizeList(_, n) => *n,
        _ => 0,
    }
}

fn rows_of(value: &ColumnarValue) -> Result<ArrayRef> {
    match value {
        ColumnarValue::Array(a) => Ok(Arc::clone(a)),
        ColumnarValue::Scalar(s) => s.to_array_of_size(1),
    }
}

/// The element values of a list array, widened to f64 on read.
enum Items<'a> {
    F32(&'a Float32Array),
    F64(&'a Float64Array),
}

/// Where each row's elements are in `items`.
enum Bounds<'a> {
    Fixed(usize),
    I32(&'a [i32]),
    I64(&'a [i64]),
}

/// One argument: a list array (or a one-row array broadcast to every row).
struct Vectors<'a> {
    row_nulls: Option<&'a NullBuffer>,
    item_nulls: Option<&'a NullBuffer>,
    items: Option<Items<'a>>,
    bounds: Bounds<'a>,
    broadcast: bool,
}

impl<'a> Vectors<'a> {
    fn try_new(array: &'a ArrayRef) -> Result<Self> {
        let broadcast = array.len() == 1;
        let (values, bounds) = match array.data_type() {
            // Only reachable when called without coercion: every row is NULL.
            DataType::Null => {
                return Ok(Self {
                    row_nulls: None,
                    item_nulls: None,
                    items: None,
                    bounds: Bounds::Fixed(0),
                    broadcast,
                });
            }
            DataType::FixedSizeList(..) => {
                let list = array.as_fixed_size_list();
                let dim = usize::try_from(list.value_length()).unwrap_or(0);
                (list.values(), Bounds::Fixed(dim))
            }
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                (list.values(), Bounds::I32(list.value_offsets()))
            }
            DataType::LargeList(_) => {
                let list = array.as_list::<i64>();
                (list.values(), Bounds::I64(list.value_offsets()))
            }
            other => return exec_err!("l2_distance got {other} after coercion"),
        };
        let items = match values.data_type() {
            DataType::Float32 => Items::F32(values.as_primitive::<Float32Type>()),
            DataType::Float64 => Items::F64(values.as_primitive::<Float64Type>()),
            other => return exec_err!("l2_distance got a list of {other} after coercion"),
        };
        Ok(Self {
            row_nulls: array.nulls(),
            item_nulls: values.nulls(),
            items: Some(items),
            bounds,
            broadcast,
        })
    }

    /// Row `i`'s element range, or `None` when the row is NULL.
    fn row(&self, i: usize) -> Option<(usize, usize)> {
        let i = if self.broadcast { 0 } else { i };
        self.items.as_ref()?;
        if self.row_nulls.is_some_and(|n| n.is_null(i)) {
            return None;
        }
        let to_usize = |x: i64| usize::try_from(x).unwrap_or(0);
        Some(match self.bounds {
            Bounds::Fixed(dim) => (i * dim, (i + 1) * dim),
            Bounds::I32(o) => (to_usize(o[i].into()), to_usize(o[i + 1].into())),
            Bounds::I64(o) => (to_usize(o[i]), to_usize(o[i + 1])),
        })
    }

    fn has_null_in(&self, (start, end): (usize, usize)) -> bool {
        self.item_nulls
            .is_some_and(|n| (start..end).any(|j| n.is_null(j)))
    }

    fn items(&self) -> Option<&Items<'a>> {
        self.items.as_ref()
    }
}

/// Σ (a - b)², each element widened to f64, summed in element order: the loop
/// `array_distance` and the CPU kernel run.
fn sum_squares<A: Copy + Into<f64>, B: Copy + Into<f64>>(a: &[A], b: &[B]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| {
            let diff = (*x).into() - (*y).into();
            diff * diff
        })
        .sum()
}

/// `array_distance`'s order of checks: NULL rows, then NULL elements, then lengths.
fn l2_of_row(a: &Vectors<'_>, b: &Vectors<'_>, i: usize) -> Result<Option<f64>> {
    let (Some(ra), Some(rb)) = (a.row(i), b.row(i)) else {
        return Ok(None);
    };
    if a.has_null_in(ra) || b.has_null_in(rb) {
        return Ok(None);
    }
    let (len_a, len_b) = (ra.1 - ra.0, rb.1 - rb.0);
    if len_a != len_b {
        return exec_err!(
            "l2_distance: dimension mismatch in row {i}: a vector of {len_a} elements against one of {len_b}"
        );
    }
    let (x, y) = (ra.0..ra.1, rb.0..rb.1);
    let sum = match (a.items(), b.items()) {
        (Some(Items::F32(p)), Some(Items::F32(q))) => sum_squares(&p.values()[x], &q.values()[y]),
        (Some(Items::F32(p)), Some(Items::F64(q))) => sum_squares(&p.values()[x], &q.values()[y]),
        (Some(Items::F64(p)), Some(Items::F32(q))) => sum_squares(&p.values()[x], &q.values()[y]),
        (Some(Items::F64(p)), Some(Items::F64(q))) => sum_squares(&p.values()[x], &q.values()[y]),
        // `row` is None for an argument without items.
        (None, _) | (_, None) => return Ok(None),
    };
    Ok(Some(sum.sqrt()))
}

#[cfg(test)]
mod tests {
    use arrow::array::{FixedSizeListArray, Int64Array, ListArray, RecordBatch};
    use arrow::datatypes::{Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::datasource::memory::MemorySourceConfig;
    use datafusion::physical_plan::ExecutionPlan;
    use datafusion::prelude::SessionContext;
    use oxidelake_core::BackendKind;
    use oxidelake_device::CpuBackend;
    use oxidelake_device::ops::DistanceMetric;

    use super::*;
    use crate::{BackendChoice, GpuVectorDistanceExec};

    const DIM: usize = 8;
    const ROWS: usize = 600;

    /// SplitMix64, seeded.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn one_in(&mut self, n: u64) -> bool {
            self.next().is_multiple_of(n)
        }
        fn float(&mut self) -> f32 {
            // Not exactly representable in fewer bits: exercises the f32 -> f64 widening.
            ((self.next() >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 37.3
        }
    }

    /// k, v: FixedSizeList<Float32> with NULL rows and NULL elements, w: List<Float64>
    /// of the same dimension with NULL rows, x: FixedSizeList<Float64>.
    fn table(seed: u64) -> RecordBatch {
        let mut rng = Rng(seed);
        let item32 = Arc::new(Field::new("item", DataType::Float32, true));
        let item64 = Arc::new(Field::new("item", DataType::Float64, true));
        let v_values: Float32Array = (0..ROWS * DIM)
            .map(|_| (!rng.one_in(97)).then(|| rng.float()))
            .collect();
        let v_valid: Vec<bool> = (0..ROWS).map(|_| !rng.one_in(11)).collect();
        let v = FixedSizeListArray::new(
            Arc::clone(&item32),
            DIM as i32,
            Arc::new(v_values),
            Some(v_valid.into()),
        );
        let w = ListArray::from_iter_primitive::<Float64Type, _, _>((0..ROWS).map(|_| {
            let row: Vec<Option<f64>> = (0..DIM)
                .map(|_| Some(f64::from(rng.float()) * 1.000_000_1))
                .collect();
            (!rng.one_in(13)).then_some(row)
        }));
        let x_values: Float64Array = (0..ROWS * DIM)
            .map(|_| Some(f64::from(rng.float()) / 3.0))
            .collect();
        let x = FixedSizeListArray::new(item64, DIM as i32, Arc::new(x_values), None);
        let schema = Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("v", v.data_type().clone(), true),
            Field::new("w", w.data_type().clone(), true),
            Field::new("x", x.data_type().clone(), true),
        ]);
        RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from_iter_values(0..ROWS as i64)),
                Arc::new(v),
                Arc::new(w),
                Arc::new(x),
            ],
        )
        .unwrap()
    }

    fn context(batch: &RecordBatch) -> SessionContext {
        let ctx = SessionContext::new();
        ctx.register_udf(l2_distance_udf());
        // Two slices: the second batch starts at a non-zero offset.
        let parts = vec![vec![batch.slice(0, 250), batch.slice(250, ROWS - 250)]];
        let table = MemTable::try_new(batch.schema(), parts).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx
    }

    async fn columns(ctx: &SessionContext, sql: &str) -> Vec<Vec<Option<u64>>> {
        let batches = ctx.sql(sql).await.unwrap().collect().await.unwrap();
        let batch = arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap();
        batch
            .columns()
            .iter()
            .map(|c| {
                assert_eq!(c.data_type(), &DataType::Float64);
                // Bit patterns: equality to the last bit, NULL for NULL.
                c.as_primitive::<Float64Type>()
                    .iter()
                    .map(|d| d.map(f64::to_bits))
                    .collect()
            })
            .collect()
    }

    #[tokio::test]
    async fn l2_distance_equals_array_distance_bit_for_bit_on_seeded_random_vectors() {
        let query = "[1.5, -2.25, 0.1, 3.0, 0.0, -7.5, 2.2, 9.75]";
        let w_large = "arrow_cast(w, 'LargeList(Float64)')";
        let v_large = "arrow_cast(v, 'LargeList(Float32)')";
        for seed in [7, 8, 9] {
            let ctx = context(&table(seed));
            let pairs = [
                format!("l2_distance(v, {query}), array_distance(v, {query})"),
                format!("l2_distance({query}, v), array_distance({query}, v)"),
                "l2_distance(v, w), array_distance(v, w)".to_string(),
                "l2_distance(w, v), array_distance(w, v)".to_string(),
                "l2_distance(x, v), array_distance(x, v)".to_string(),
                format!("l2_distance({w_large}, {v_large}), array_distance({w_large}, {v_large})"),
                "l2_distance(v, [1, 2, 3, 4, 5, 6, 7, 8]), array_distance(v, [1, 2, 3, 4, 5, 6, 7, 8])".to_string(),
            ];
            for pair in pairs {
                let cols = columns(&ctx, &format!("SELECT {pair} FROM t ORDER BY k")).await;
                assert_eq!(cols[0], cols[1], "seed {seed}: {pair}");
                let nulls = cols[0].iter().filter(|d| d.is_none()).count();
                assert!(
                    nulls > 0 && nulls < ROWS / 2,
                    "seed {seed}: {nulls} NULLs in {pair}"
                );
            }
        }
    }

    #[tokio::test]
    async fn l2_distance_equals_the_cpu_kernel_of_gpu_vector_distance_exec() {
        let batch = table(21);
        let query = vec![0.5f32, -1.25, 3.3, 0.0, 2.0, -0.7, 1.1, 4.0];
        let ctx = context(&batch);
        // The f32 values written exactly as f64 literals.
        let exact: Vec<f64> = query.iter().map(|q| f64::from(*q)).collect();
        let literal = format!("{exact:?}");
        let ours = columns(
            &ctx,
            &format!("SELECT l2_distance(v, {literal}) FROM t ORDER BY k"),
        )
        .await;
        let schema = batch.schema();
        let source = MemorySourceConfig::try_new_exec(&[vec![batch]], schema, None).unwrap();
        let exec: Arc<dyn ExecutionPlan> = Arc::new(
            GpuVectorDistanceExec::try_new(
                source,
                1,
                query,
                DistanceMetric::L2,
                "d",
                BackendKind::CpuSimd,
            )
            .unwrap()
            .with_backend(BackendChoice::Fixed(Arc::new(CpuBackend::new()))),
        );
        let batches = datafusion::physical_plan::collect(exec, ctx.task_ctx())
            .await
            .unwrap();
        let kernel: Vec<Option<u64>> = batches
            .iter()
            .flat_map(|b| {
                let d = b.column(4).as_primitive::<Float64Type>();
                d.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(ours[0], kernel);
    }

    #[tokio::test]
    async fn null_rows_are_null_and_scalars_give_a_scalar() {
        let ctx = SessionContext::new();
        ctx.register_udf(l2_distance_udf());
        let batches = ctx
            .sql("SELECT l2_distance([0.0, 0.0], [3.0, 4.0]) AS a, l2_distance(NULL, [1.0]) AS b, l2_distance([], []) AS c")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let row = &batches[0];
        let value = |i: usize| {
            row.column(i)
                .as_primitive::<Float64Type>()
                .iter()
                .next()
                .flatten()
        };
        assert_eq!(value(0), Some(5.0));
        assert_eq!(value(1), None);
        // -0.0 like array_distance (Rust's empty f64 sum); == 0.0 either way.
        assert_eq!(value(2).map(f64::to_bits), Some((-0.0f64).to_bits()));
    }

    #[tokio::test]
    async fn a_dimension_mismatch_is_an_execution_error_naming_both_lengths() {
        let ctx = context(&table(3));
        let err = ctx
            .sql("SELECT l2_distance(v, [1.0, 2.0, 3.0]) FROM t")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("dimension mismatch"), "{err}");
        assert!(err.contains("8 elements against one of 3"), "{err}");
    }

    #[tokio::test]
    async fn non_list_arguments_are_rejected_when_planning() {
        let ctx = SessionContext::new();
        ctx.register_udf(l2_distance_udf());
        let err = ctx
            .sql("SELECT l2_distance(1.0, [1.0])")
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("l2_distance takes two lists of numbers"),
            "{err}"
        );
        let err = ctx
            .sql("SELECT l2_distance(['a'], ['b'])")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("one-dimensional lists of numbers"), "{err}");
    }
}
