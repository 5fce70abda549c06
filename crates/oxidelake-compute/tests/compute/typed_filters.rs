//! GpuFilterExec over the types TPC-H uses (Int32, Date32, Decimal128, Float32, Boolean,
//! Utf8, Utf8View, dictionary strings) with NULLs everywhere, against stock DataFusion
//! running the same WHERE clause. The CPU run is always on; the `_on_the_detected_gpu`
//! run also requires that no batch fell back to the CPU, so on the emulated driver it
//! proves the device program handled every shape (strings and LIKE included).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Date32Array, Decimal128Array, DictionaryArray, Float32Array,
    Int32Array, StringArray, StringViewArray,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::MemTable;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};
use oxidelake_compute::{BackendChoice, GpuFilterExec};
use oxidelake_core::BackendKind;
use oxidelake_device::{CpuBackend, HardwareDetector};

use super::data::Rng;
use super::rows::assert_same_rows;

fn schema() -> SchemaRef {
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    Arc::new(Schema::new(vec![
        Field::new("i", DataType::Int32, true),
        Field::new("d", DataType::Date32, true),
        Field::new("m", DataType::Decimal128(15, 2), true),
        Field::new("f", DataType::Float32, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::Utf8View, true),
        Field::new("c", dict, true),
        Field::new("e", DataType::Date32, true),
    ]))
}

fn batch(rng: &mut Rng, rows: usize) -> RecordBatch {
    let mut maybe = |n: u64| -> Option<u64> { (rng.below(11) != 0).then(|| rng.below(n)) };
    let i: Int32Array = (0..rows)
        .map(|_| {
            maybe(43).map(|v| match v {
                41 => i32::MAX,
                42 => i32::MIN,
                v => v as i32 - 20,
            })
        })
        .collect();
    let d: Date32Array = (0..rows)
        .map(|_| maybe(400).map(|v| 9000 + v as i32))
        .collect();
    // Cents, and the largest and smallest DECIMAL(15, 2).
    let m = (0..rows)
        .map(|_| {
            maybe(14).map(|v| match v {
                12 => 999_999_999_999_999,
                13 => -999_999_999_999_999,
                v => v as i128,
            })
        })
        .collect::<Decimal128Array>()
        .with_precision_and_scale(15, 2)
        .unwrap();
    let floats = [
        0.25f32,
        -0.0,
        0.0,
        0.5,
        0.75,
        f32::NAN,
        -1.5,
        2.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ];
    let f: Float32Array = (0..rows)
        .map(|_| maybe(floats.len() as u64).map(|v| floats[v as usize]))
        .collect();
    let b: BooleanArray = (0..rows).map(|_| maybe(2).map(|v| v == 1)).collect();
    let word = |v: u64| format!("x{v}");
    let s: StringArray = (0..rows).map(|_| maybe(10).map(word)).collect();
    let v: StringViewArray = (0..rows)
        .map(|_| maybe(20).map(|n| format!("{}-a longer tail past twelve bytes", word(n))))
        .collect();
    let c: DictionaryArray<Int32Type> = (0..rows)
        .map(|_| maybe(10).map(word))
        .collect::<Vec<_>>()
        .iter()
        .map(|o| o.as_deref())
        .collect();
    let e: Date32Array = (0..rows)
        .map(|_| maybe(400).map(|v| 9000 + v as i32))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(i),
        Arc::new(d),
        Arc::new(m),
        Arc::new(f),
        Arc::new(b),
        Arc::new(s),
        Arc::new(v),
        Arc::new(c),
        Arc::new(e),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn cmp(column: usize, op: CmpOp, literal: Literal) -> Predicate {
    Predicate::Compare(ColumnPredicate {
        column,
        op,
        literal,
    })
}

fn text(v: &str) -> Literal {
    Literal::Utf8(v.into())
}

fn like(column: usize, pattern: &str, negated: bool) -> Predicate {
    Predicate::Like {
        column,
        pattern: pattern.into(),
        negated,
    }
}

/// (WHERE clause, our predicates).
fn cases() -> Vec<(&'static str, Vec<Predicate>)> {
    vec![
        (
            "i > 10 AND d < CAST('1995-03-15' AS DATE)",
            vec![
                cmp(0, CmpOp::Gt, Literal::Int64(10)),
                cmp(1, CmpOp::Lt, Literal::Int64(9204)),
            ],
        ),
        (
            "m >= CAST(0.05 AS DECIMAL(15, 2)) AND m <= CAST(0.07 AS DECIMAL(15, 2))",
            vec![
                cmp(2, CmpOp::GtEq, Literal::Int64(5)),
                cmp(2, CmpOp::LtEq, Literal::Int64(7)),
            ],
        ),
        (
            "f > CAST(0.5 AS REAL) OR b",
            vec![Predicate::Or(vec![
                cmp(3, CmpOp::Gt, Literal::Float64(0.5)),
                cmp(4, CmpOp::Eq, Literal::Int64(1)),
            ])],
        ),
        // -0.0 = 0.0 in DataFusion (its comparisons normalise the zero's sign), not in
        // IEEE total order alone.
        (
            "f = CAST(0.0 AS REAL)",
            vec![cmp(3, CmpOp::Eq, Literal::Float64(0.0))],
        ),
        (
            "f >= CAST(0.0 AS REAL) AND f <= CAST(0.0 AS REAL) OR f < CAST(-0.0 AS REAL)",
            vec![Predicate::Or(vec![
                Predicate::And(vec![
                    cmp(3, CmpOp::GtEq, Literal::Float64(0.0)),
                    cmp(3, CmpOp::LtEq, Literal::Float64(0.0)),
                ]),
                cmp(3, CmpOp::Lt, Literal::Float64(-0.0)),
            ])],
        ),
        // NaN sorts above +inf, -inf below every other number.
        (
            "f > CAST('inf' AS REAL) OR f <= CAST('-inf' AS REAL)",
            vec![Predicate::Or(vec![
                cmp(3, CmpOp::Gt, Literal::Float64(f64::INFINITY)),
                cmp(3, CmpOp::LtEq, Literal::Float64(f64::NEG_INFINITY)),
            ])],
        ),
        (
            "s = 'x3' OR s IN ('x5', 'x7')",
            vec![Predicate::Or(vec![
                cmp(5, CmpOp::Eq, text("x3")),
                cmp(5, CmpOp::Eq, text("x5")),
                cmp(5, CmpOp::Eq, text("x7")),
            ])],
        ),
        (
            "v LIKE 'x1%' AND v NOT LIKE '%x15-%'",
            vec![like(6, "x1%", false), like(6, "%x15-%", true)],
        ),
        (
            "c = 'x2' OR c LIKE '%9' OR c >= 'x8'",
            vec![Predicate::Or(vec![
                cmp(7, CmpOp::Eq, text("x2")),
                like(7, "%9", false),
                cmp(7, CmpOp::GtEq, text("x8")),
            ])],
        ),
        (
            "d < e AND NOT (s IS NULL)",
            vec![
                Predicate::CompareColumns {
                    left: 1,
                    op: CmpOp::Lt,
                    right: 8,
                },
                Predicate::Not(Box::new(Predicate::IsNull {
                    column: 5,
                    negated: false,
                })),
            ],
        ),
    ]
}

async fn typed_filter_cases(backend: BackendChoice) -> usize {
    let mut compared = 0;
    for seed in 0..6 {
        let mut rng = Rng::new(100 + seed);
        let parts: Vec<Vec<RecordBatch>> = (0..3)
            .map(|p| vec![batch(&mut rng, 1 + 700 * p + seed as usize * 13)])
            .collect();
        let ctx = SessionContext::new();
        let table = MemTable::try_new(schema(), parts.clone()).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        for (where_sql, predicates) in cases() {
            let source = MemorySourceConfig::try_new_exec(&parts, schema(), None).unwrap();
            let plan: Arc<dyn ExecutionPlan> = Arc::new(
                GpuFilterExec::try_new(source, predicates, (0..9).collect(), BackendKind::Cuda)
                    .unwrap()
                    .with_backend(backend.clone()),
            );
            let got = collect(Arc::clone(&plan), ctx.task_ctx()).await.unwrap();
            let want = ctx
                .sql(&format!("SELECT * FROM t WHERE {where_sql}"))
                .await
                .unwrap()
                .collect()
                .await
                .unwrap();
            compared += assert_same_rows(&format!("seed {seed}: {where_sql}"), &got, &want, 0.0);
            if !matches!(backend, BackendChoice::Fixed(_)) {
                let fallbacks = plan
                    .metrics()
                    .and_then(|m| m.sum_by_name("cpu_fallback_batches"))
                    .map(|v| v.as_usize())
                    .unwrap_or(0);
                assert_eq!(
                    fallbacks, 0,
                    "{where_sql}: the device run fell back to the CPU"
                );
            }
        }
    }
    compared
}

#[tokio::test]
async fn typed_and_string_filters_on_the_cpu_equal_stock_datafusion() {
    let rows = typed_filter_cases(BackendChoice::Fixed(Arc::new(CpuBackend::new()))).await;
    assert!(rows > 500, "compared only {rows} rows");
}

#[tokio::test]
#[ignore = "needs a CUDA device (or the emulated driver): --features cuda -- --ignored"]
async fn typed_and_string_filters_on_the_detected_gpu_equal_stock_datafusion_without_fallback() {
    let backend = HardwareDetector::select().unwrap();
    assert_ne!(
        backend.kind(),
        BackendKind::CpuSimd,
        "no GPU backend detected"
    );
    let rows = typed_filter_cases(BackendChoice::Detect).await;
    assert!(rows > 500, "compared only {rows} rows");
}
