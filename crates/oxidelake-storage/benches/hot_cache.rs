//! A repeat query over a Parquet table, read from its Parquet files against read from
//! the hot cache's Arrow IPC copy (`CACHE TABLE`): the same DataFusion plan above the
//! scan, so the difference is decoding Parquet.
//!
//! The table has 4 million rows (`OXIDE_BENCH_ROWS` overrides) of an integer key, an
//! integer value, a float and a short string, written by the lake writer with its
//! defaults (lz4 pages, dictionaries, statistics) into one file.
//!
//! Run: `cargo bench --workspace --bench hot_cache`. Results are in docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, criterion_group, criterion_main};
use datafusion::prelude::SessionContext;
use oxidelake_storage::{
    HotCache, LakeWriterOptions, lake_session_config, register_parquet, write_parquet_file,
};

const BATCH_ROWS: usize = 8192;
/// Two repeat queries: one whose time goes mostly into grouping, one mostly into
/// reading the columns.
const QUERIES: [(&str, &str); 2] = [
    (
        "group_by",
        "SELECT k % 16 AS g, SUM(v), AVG(x), COUNT(*) FROM t WHERE s <> 'FLAG-3' GROUP BY g",
    ),
    (
        "scan",
        "SELECT SUM(v), MIN(s), MAX(x), COUNT(*) FROM t WHERE k < 900",
    ),
];

fn rows() -> usize {
    std::env::var("OXIDE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000_000)
}

fn write_table(path: &std::path::Path, rows: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("v", DataType::Int64, false),
        Field::new("x", DataType::Float64, false),
        Field::new("s", DataType::Utf8, false),
    ]));
    let batches: Vec<RecordBatch> = (0..rows)
        .step_by(BATCH_ROWS)
        .map(|start| {
            let ids = (start..(start + BATCH_ROWS).min(rows)).map(|i| i as i64);
            let columns: Vec<ArrayRef> = vec![
                Arc::new(Int64Array::from_iter_values(ids.clone().map(|i| i % 1000))),
                Arc::new(Int64Array::from_iter_values(
                    ids.clone().map(|i| (i * 7919) % 100_003),
                )),
                Arc::new(Float64Array::from_iter_values(
                    ids.clone().map(|i| (i % 997) as f64 * 0.25),
                )),
                Arc::new(StringArray::from_iter_values(
                    ids.map(|i| format!("FLAG-{}", i % 5)),
                )),
            ];
            RecordBatch::try_new(Arc::clone(&schema), columns).unwrap()
        })
        .collect();
    write_parquet_file(path, schema, &batches, &LakeWriterOptions::default()).unwrap();
}

fn hot_cache(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.parquet");
    write_table(&file, rows());
    let session = |cached: bool| {
        runtime.block_on(async {
            let ctx = SessionContext::new_with_config(lake_session_config());
            register_parquet(&ctx, "t", file.to_str().unwrap())
                .await
                .unwrap();
            if cached {
                let cache = HotCache::local(dir.path().join("hot")).unwrap();
                cache.cache_table(&ctx, "t").await.unwrap();
            }
            ctx
        })
    };
    let (parquet, cached) = (session(false), session(true));
    let run = |ctx: &SessionContext, sql: &str| {
        runtime.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() })
    };
    for (name, sql) in QUERIES {
        assert_eq!(
            sorted(run(&parquet, sql)),
            sorted(run(&cached, sql)),
            "{name}: both read the same rows"
        );
        let mut group = c.benchmark_group(format!("hot_cache_repeat_{name}"));
        group.sample_size(10);
        group.bench_function("parquet", |b| b.iter(|| run(&parquet, sql)));
        group.bench_function("ipc_cache", |b| b.iter(|| run(&cached, sql)));
        group.finish();
    }
}

/// The result as sorted text lines (group order is not defined).
fn sorted(batches: Vec<RecordBatch>) -> Vec<String> {
    let text = arrow::util::pretty::pretty_format_batches(&batches)
        .unwrap()
        .to_string();
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    lines.sort();
    lines
}

criterion_group!(benches, hot_cache);
criterion_main!(benches);
