//! A small generated lake: Parquet files with NULLs, skewed keys, vectors and an empty
//! table.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use oxidelake_storage::{LakeWriterOptions, write_parquet_file};

fn t_schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("s", DataType::Utf8, true),
        Field::new("v", DataType::FixedSizeList(item, 3), true),
    ]))
}

/// Rows `start..start+n` of the fact table: skewed keys (half the rows have k = 0),
/// NULLs in every column, exactly representable floats (sums are order-independent).
fn t_batch(start: i64, n: usize, all_null: bool) -> RecordBatch {
    let ids: Vec<i64> = (start..start + n as i64).collect();
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    let values: Vec<f32> = ids
        .iter()
        .flat_map(|i| [(i % 5) as f32, (i % 3) as f32 - 1.0, 0.5])
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from_iter(ids.iter().map(|i| {
            (i % 11 != 0).then_some(if i % 2 == 0 { 0 } else { i % 37 })
        }))),
        Arc::new(Int64Array::from_iter(
            ids.iter()
                .map(|i| (!all_null && i % 7 != 0).then_some((i * 31) % 1000)),
        )),
        Arc::new(Float64Array::from_iter(ids.iter().map(|i| {
            (!all_null && i % 13 != 0).then_some((i % 97) as f64 * 0.5)
        }))),
        Arc::new(StringArray::from_iter(
            ids.iter()
                .map(|i| (i % 4 != 0).then(|| format!("s{}", i % 6))),
        )),
        Arc::new(FixedSizeListArray::new(
            item,
            3,
            Arc::new(Float32Array::from(values)),
            Some(ids.iter().map(|i| i % 17 != 0).collect()),
        )),
    ];
    RecordBatch::try_new(t_schema(), columns).unwrap()
}

fn d_batch() -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("name", DataType::Utf8, true),
        Field::new("w", DataType::Float64, true),
    ]));
    let keys: Vec<Option<i64>> = (0..40)
        .map(|i| (i % 9 != 8).then_some(i))
        .chain([Some(0), Some(5), None])
        .collect();
    let n = keys.len();
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(Int64Array::from(keys)),
            Arc::new(StringArray::from_iter(
                (0..n).map(|i| Some(format!("d{i}"))),
            )),
            Arc::new(Float64Array::from_iter(
                (0..n).map(|i| Some(i as f64 * 0.25)),
            )),
        ],
    )
    .unwrap()
}

/// Writes the tables under `dir`: `t/` (two files), `d/`, `e/` (empty, t's schema) and
/// `n/` (t's schema, every a and b NULL). Returns (name, directory) pairs.
pub fn write_lake(dir: &Path) -> Vec<(&'static str, String)> {
    let options = LakeWriterOptions::default();
    let mut tables = Vec::new();
    let mut table = |name: &'static str, files: Vec<(SchemaRef, Vec<RecordBatch>)>| {
        let table_dir = dir.join(name);
        std::fs::create_dir_all(&table_dir).unwrap();
        for (i, (schema, batches)) in files.into_iter().enumerate() {
            write_parquet_file(
                table_dir.join(format!("part-{i}.parquet")),
                schema,
                &batches,
                &options,
            )
            .unwrap();
        }
        tables.push((name, format!("{}/", table_dir.display())));
    };
    table(
        "t",
        vec![
            (
                t_schema(),
                vec![t_batch(0, 3000, false), t_batch(3000, 1001, false)],
            ),
            (t_schema(), vec![t_batch(10_000, 2500, false)]),
        ],
    );
    let d = d_batch();
    table("d", vec![(d.schema(), vec![d])]);
    table("e", vec![(t_schema(), vec![])]);
    table("n", vec![(t_schema(), vec![t_batch(0, 500, true)])]);
    tables
}

/// Every row of `batches` as its cells' display strings (NULL as `None`).
pub fn cells(batches: &[RecordBatch]) -> Vec<Vec<Option<String>>> {
    use arrow::array::Array;
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default();
    let mut rows = Vec::new();
    for batch in batches {
        let formatters: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            rows.push(
                batch
                    .columns()
                    .iter()
                    .zip(&formatters)
                    .map(|(c, f)| c.is_valid(row).then(|| f.value(row).to_string()))
                    .collect(),
            );
        }
    }
    rows
}

/// Rows as `v1|v2|...` strings, sorted.
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    let mut rows: Vec<String> = cells(batches)
        .into_iter()
        .map(|row| {
            row.into_iter()
                .map(|c| c.unwrap_or_else(|| "NULL".into()))
                .collect::<Vec<_>>()
                .join("|")
        })
        .collect();
    rows.sort();
    rows
}

pub use crate::generated::{GeneratedData, tpch_data};

/// The shared TPC-H data at `scale_factor` ([`tpch_data`]) and a session placed for CUDA
/// (the GPU operators' CPU paths unless `OXIDE_BACKEND` says otherwise) with every table
/// registered.
pub async fn tpch_lake(scale_factor: f64) -> (GeneratedData, oxidelake_runtime::OxideSession) {
    let dir = tokio::task::spawn_blocking(move || tpch_data(scale_factor))
        .await
        .unwrap();
    let session = oxidelake_runtime::OxideSession::local_with(
        oxidelake_runtime::PlacementTarget::Cuda,
        std::sync::Arc::new(oxidelake_planner::FixedProbe(
            oxidelake_core::BackendKind::CpuSimd,
        )),
    );
    oxidelake_runtime::cli::tables::register_data_dir(&session, dir.path())
        .await
        .unwrap();
    (dir, session)
}

/// Runs `query` on `session` and returns its rows ([`sorted_rows`]) and the plan that ran,
/// whose nodes hold the run's metrics.
pub async fn run_plan(
    session: &oxidelake_runtime::OxideSession,
    query: &str,
) -> (
    Vec<String>,
    Arc<dyn datafusion::physical_plan::ExecutionPlan>,
) {
    let plan = session.physical_plan(query).await.unwrap();
    let batches =
        datafusion::physical_plan::collect(Arc::clone(&plan), session.context().task_ctx())
            .await
            .unwrap();
    (sorted_rows(&batches), plan)
}

/// The sum of metric `name` over the nodes of `plan` that `pick` selects.
pub fn metric_sum(
    plan: &Arc<dyn datafusion::physical_plan::ExecutionPlan>,
    pick: impl Fn(&dyn datafusion::physical_plan::ExecutionPlan) -> bool,
    name: &str,
) -> usize {
    let mut sum = 0;
    let mut stack = vec![Arc::clone(plan)];
    while let Some(node) = stack.pop() {
        if pick(node.as_ref()) {
            sum += node
                .metrics()
                .and_then(|m| m.sum_by_name(name))
                .map_or(0, |v| v.as_usize());
        }
        stack.extend(node.children().into_iter().cloned());
    }
    sum
}

/// Whether the executing backend is a device (`OXIDE_BACKEND=cuda` on the emulated
/// driver, as `scripts/test-cuda-emulated.sh` runs some of these tests).
pub fn on_device() -> bool {
    oxidelake_device::HardwareDetector::shared()
        .is_ok_and(|b| b.kind() != oxidelake_core::BackendKind::CpuSimd)
}
