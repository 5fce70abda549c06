//! The device partial aggregate against stock DataFusion: every covered key and value
//! type, NULL keys and values, several partitions, decimal sums that must be cut into
//! exact slices, COUNT(*), AVG and aggregates without GROUP BY return the rows of the
//! stock plan, and the placed plan really holds a GpuPartialAggregateExec.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Date32Array, Decimal128Array, Float64Array, Int8Array, Int32Array, RecordBatch,
    StringViewArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::datasource::MemTable;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::SessionContext;
use oxidelake_core::BackendKind;
use oxidelake_planner::PlacementTarget;

use super::fixtures::session;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("flag", DataType::Utf8View, true),
        Field::new("i32", DataType::Int32, true),
        Field::new("d", DataType::Date32, true),
        Field::new("m", DataType::Decimal128(15, 2), true),
        Field::new("big", DataType::Decimal128(18, 0), true),
        Field::new("f", DataType::Float64, true),
        Field::new("i8", DataType::Int8, true),
    ]))
}

/// `rows` deterministic rows starting at `seed`: low-cardinality keys, about one NULL in
/// seven per column, decimals near 10^17 (so an i64 sum of a whole batch would overflow).
fn batch(seed: u64, rows: usize) -> RecordBatch {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        state >> 33
    };
    let mut cols: (Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>, Vec<_>) = Default::default();
    for _ in 0..rows {
        let r = next();
        let null = |salt: u64| (r >> salt).is_multiple_of(7);
        cols.0
            .push((!null(1)).then(|| ["A", "N", "R", "a longer flag value"][(r % 4) as usize]));
        cols.1.push((!null(2)).then_some((r % 13) as i32 - 6));
        cols.2.push((!null(3)).then_some(19_000 + (r % 40) as i32));
        cols.3
            .push((!null(4)).then_some((r % 2_000_000) as i128 - 1_000_000));
        cols.4
            .push((!null(5)).then_some(((r % 19) as i128 - 9) * 10_000_000_000_000_000));
        cols.5
            .push((!null(6)).then_some((r % 64) as f64 * 0.25 - 4.0));
        cols.6.push((!null(7)).then_some((r % 200) as i8));
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringViewArray::from(cols.0)),
        Arc::new(Int32Array::from(cols.1)),
        Arc::new(Date32Array::from(cols.2)),
        Arc::new(
            Decimal128Array::from(cols.3)
                .with_precision_and_scale(15, 2)
                .unwrap(),
        ),
        Arc::new(
            Decimal128Array::from(cols.4)
                .with_precision_and_scale(18, 0)
                .unwrap(),
        ),
        Arc::new(Float64Array::from(cols.5)),
        Arc::new(Int8Array::from(cols.6)),
    ];
    RecordBatch::try_new(schema(), columns).unwrap()
}

fn register(ctx: &SessionContext) {
    let partitions = vec![
        vec![batch(1, 1500), batch(2, 800)],
        vec![batch(3, 1200)],
        vec![],
    ];
    let table = MemTable::try_new(schema(), partitions).unwrap();
    ctx.register_table("w", Arc::new(table)).unwrap();
}

fn device_partials(plan: &Arc<dyn ExecutionPlan>) -> usize {
    let mut n = 0;
    plan.apply(|node| {
        n += usize::from(node.name() == "GpuPartialAggregateExec");
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    n
}

/// Every row as `v1|v2|...` (NULL spelled out), sorted.
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for b in batches {
        let formatters: Vec<ArrayFormatter> = b
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..b.num_rows() {
            let cells: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            rows.push(cells.join("|"));
        }
    }
    rows.sort();
    rows
}

const QUERIES: &[&str] = &[
    "SELECT flag, i32, SUM(m), AVG(m), COUNT(*), MIN(d), MAX(d), MIN(m) FROM w GROUP BY flag, i32",
    "SELECT i32, SUM(big), AVG(big), MIN(big), MAX(big), COUNT(big) FROM w GROUP BY i32",
    "SELECT SUM(i8), MIN(i8), MAX(i32), AVG(i32), COUNT(m), SUM(big) FROM w",
    "SELECT d, COUNT(flag), SUM(f), AVG(f), MIN(f), MAX(f) FROM w GROUP BY d",
    "SELECT flag, SUM(m), COUNT(*) FROM w WHERE i32 IS NULL GROUP BY flag",
    "SELECT m, COUNT(*) FROM w GROUP BY m",
    "SELECT i8, SUM(i32) FROM w GROUP BY i8 HAVING SUM(i32) > 0",
    "SELECT COUNT(*) FROM w WHERE f > 100.0",
];

#[tokio::test]
async fn every_covered_aggregate_shape_returns_the_rows_of_the_stock_plan() {
    let cpu = session(PlacementTarget::Cpu, BackendKind::CpuSimd);
    let cuda = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
    register(&cpu);
    register(&cuda);
    for sql in QUERIES {
        let stock = cpu.sql(sql).await.unwrap().collect().await.unwrap();
        let frame = cuda.sql(sql).await.unwrap();
        let plan = frame.clone().create_physical_plan().await.unwrap();
        assert_eq!(
            device_partials(&plan),
            1,
            "{sql}\n{}",
            datafusion::physical_plan::displayable(plan.as_ref()).indent(true)
        );
        let placed = frame.collect().await.unwrap();
        let (expected, got) = (sorted_rows(&stock), sorted_rows(&placed));
        assert!(!expected.is_empty(), "{sql}");
        assert!(
            expected == got,
            "{sql}: {} rows stock, {} placed; first difference {:?}",
            expected.len(),
            got.len(),
            expected.iter().zip(&got).find(|(a, b)| a != b)
        );
    }
}

#[tokio::test]
async fn sums_of_large_decimals_are_exact_beyond_the_range_of_an_i64() {
    let cuda = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
    let schema = Arc::new(Schema::new(vec![Field::new(
        "x",
        DataType::Decimal128(18, 0),
        false,
    )]));
    let big = 900_000_000_000_000_000i128; // 9e17: ten of them overflow an i64
    let column = Decimal128Array::from(vec![big; 4096])
        .with_precision_and_scale(18, 0)
        .unwrap();
    let batch = RecordBatch::try_new(Arc::clone(&schema), vec![Arc::new(column)]).unwrap();
    cuda.register_table(
        "x",
        Arc::new(MemTable::try_new(schema, vec![vec![batch]]).unwrap()),
    )
    .unwrap();
    let frame = cuda.sql("SELECT SUM(x) AS s FROM x").await.unwrap();
    let plan = frame.clone().create_physical_plan().await.unwrap();
    assert_eq!(device_partials(&plan), 1);
    let out = frame.collect().await.unwrap();
    assert_eq!(sorted_rows(&out), vec![(big * 4096).to_string()]);
}

/// The rows the placed plan's `GpuPartialAggregateExec` emitted, after running it.
async fn partial_output_rows(ctx: &SessionContext, sql: &str) -> (Vec<String>, usize) {
    let plan = ctx
        .sql(sql)
        .await
        .unwrap()
        .create_physical_plan()
        .await
        .unwrap();
    let out = datafusion::physical_plan::collect(Arc::clone(&plan), ctx.task_ctx())
        .await
        .unwrap();
    let mut emitted = None;
    plan.apply(|node| {
        if node.name() == "GpuPartialAggregateExec" {
            emitted = node.metrics().and_then(|m| m.output_rows());
        }
        Ok(TreeNodeRecursion::Continue)
    })
    .unwrap();
    (
        sorted_rows(&out),
        emitted.expect("a GpuPartialAggregateExec with metrics"),
    )
}

#[tokio::test]
async fn a_partial_aggregate_that_does_not_reduce_passes_rows_through_as_the_stock_one_does() {
    // 8 batches of 250 rows in one partition (DataFusion deals them to 2 partitions).
    let batches: Vec<RecordBatch> = (0..8).map(|i| batch(100 + i, 250)).collect();
    let table = || Arc::new(MemTable::try_new(schema(), vec![batches.clone()]).unwrap());
    let sql = "SELECT flag, i32, SUM(m), AVG(m), COUNT(*), COUNT(i8), MIN(d), MAX(f), \
               SUM(big), AVG(f) FROM v GROUP BY flag, i32";
    let cpu = session(PlacementTarget::Cpu, BackendKind::CpuSimd);
    cpu.register_table("v", table()).unwrap();
    let stock = sorted_rows(&cpu.sql(sql).await.unwrap().collect().await.unwrap());
    // Each partition decides after its first 250-row batch; a ratio threshold of 0 makes
    // it skip whatever the ratio, so the other 3 batches of each pass through.
    let mut emitted = Vec::new();
    for probe_rows in [100, 100_000] {
        let cuda = session(PlacementTarget::Cuda, BackendKind::CpuSimd);
        cuda.register_table("v", table()).unwrap();
        for set in [
            format!(
                "SET datafusion.execution.skip_partial_aggregation_probe_rows_threshold = {probe_rows}"
            ),
            "SET datafusion.execution.skip_partial_aggregation_probe_ratio_threshold = 0.0".into(),
        ] {
            cuda.sql(&set).await.unwrap().collect().await.unwrap();
        }
        let (placed, rows) = partial_output_rows(&cuda, sql).await;
        assert!(
            stock == placed,
            "probe rows {probe_rows}: rows differ from stock"
        );
        emitted.push(rows);
    }
    // Skipping: at least the 6 batches after each partition's first pass through whole.
    assert!(
        emitted[0] >= 6 * 250,
        "{emitted:?}: rows were not passed through"
    );
    // Never deciding (100,000 probe rows): every batch grouped, fewer rows out.
    assert!(
        emitted[1] < emitted[0],
        "{emitted:?}: batches were not grouped"
    );
}
