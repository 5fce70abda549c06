//! Each operator's CPU path against the stock DataFusion operator it replaces, on 10
//! million rows (8192-row batches in 2 partitions, matching this machine's 2 cores).
//!
//! Run: `cargo bench -p oxidelake-compute --bench operators`
//! (`OXIDE_BENCH_ROWS` overrides the row count for a quick look). Results and the
//! measured ratios are recorded in docs/benchmarks.md.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use arrow::array::{ArrayRef, FixedSizeListArray, Float32Array, Float64Array, Int64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, criterion_group, criterion_main};
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::MemTable;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_plan::aggregates::{AggregateExec, AggregateMode};
use datafusion::physical_plan::{ExecutionPlan, collect};
use datafusion::prelude::SessionContext;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, DistanceMetric, Literal, Predicate};
use oxidelake_compute::{
    BackendChoice, GpuFilterExec, GpuHashJoinExec, GpuPartialAggregateExec, GpuVectorDistanceExec,
};
use oxidelake_core::BackendKind;
use oxidelake_device::CpuBackend;

const BATCH_ROWS: usize = 8192;
const PARTITIONS: usize = 2;

fn rows() -> usize {
    std::env::var("OXIDE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000)
}

fn schema() -> SchemaRef {
    let item = Arc::new(Field::new("item", DataType::Float32, true));
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("a", DataType::Int64, true),
        Field::new("b", DataType::Float64, true),
        Field::new("v", DataType::FixedSizeList(item, 4), true),
    ]))
}

/// Deterministic data: k in 0..64, a uniform-ish in 0..1000, b a float, v 4-d vectors.
fn partitions(total: usize, key_mod: i64) -> Vec<Vec<RecordBatch>> {
    let mut parts = vec![Vec::new(); PARTITIONS];
    let mut start = 0usize;
    let mut i = 0usize;
    while start < total {
        let n = BATCH_ROWS.min(total - start);
        let ids = (start as i64)..(start + n) as i64;
        let k = Int64Array::from_iter_values(ids.clone().map(|x| (x * 2_654_435_761) % key_mod));
        let a = Int64Array::from_iter_values(ids.clone().map(|x| (x * 7_919) % 1000));
        let b = Float64Array::from_iter_values(ids.clone().map(|x| (x % 997) as f64 * 0.25));
        let values = Float32Array::from_iter_values(
            ids.clone()
                .flat_map(|x| [(x % 13) as f32, 1.0, (x % 7) as f32, -2.0]),
        );
        let item = Arc::new(Field::new("item", DataType::Float32, true));
        let v = FixedSizeListArray::new(item, 4, Arc::new(values), None);
        let columns: Vec<ArrayRef> = vec![Arc::new(k), Arc::new(a), Arc::new(b), Arc::new(v)];
        parts[i % PARTITIONS].push(RecordBatch::try_new(schema(), columns).unwrap());
        start += n;
        i += 1;
    }
    parts
}

fn cpu() -> BackendChoice {
    BackendChoice::Fixed(Arc::new(CpuBackend::new()))
}

fn source(parts: &[Vec<RecordBatch>]) -> Arc<dyn ExecutionPlan> {
    MemorySourceConfig::try_new_exec(parts, schema(), None).unwrap()
}

fn context(tables: &[(&str, &[Vec<RecordBatch>])]) -> SessionContext {
    let ctx = SessionContext::new_with_config(
        datafusion::prelude::SessionConfig::new().with_target_partitions(PARTITIONS),
    );
    for (name, parts) in tables {
        ctx.register_table(
            *name,
            Arc::new(MemTable::try_new(schema(), parts.to_vec()).unwrap()),
        )
        .unwrap();
    }
    ctx
}

/// The stock physical plan of `sql` with its partial aggregate replaced by a
/// GpuPartialAggregateExec on the CPU backend.
fn with_device_partial(ctx: &SessionContext, sql: &str) -> Arc<dyn ExecutionPlan> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    // The plan as the placement rule sees it: partial and final apart.
    let rules = datafusion::physical_optimizer::optimizer::PhysicalOptimizer::new()
        .rules
        .into_iter()
        .filter(|r| r.name() != "CombinePartialFinalAggregate")
        .collect();
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(ctx.state())
        .with_physical_optimizer_rules(rules)
        .build();
    let plan = rt
        .block_on(async {
            let logical = state.create_logical_plan(sql).await?;
            state.create_physical_plan(&logical).await
        })
        .unwrap();
    plan.transform_up(|node| {
        let Some(agg) = node.downcast_ref::<AggregateExec>() else {
            return Ok(Transformed::no(node));
        };
        if !matches!(agg.mode(), AggregateMode::Partial) {
            return Ok(Transformed::no(node));
        }
        let gpu =
            GpuPartialAggregateExec::try_replacing(agg, BackendKind::CpuSimd)?.with_backend(cpu());
        Ok(Transformed::yes(Arc::new(gpu) as Arc<dyn ExecutionPlan>))
    })
    .unwrap()
    .data
}

fn bench_pair(
    c: &mut Criterion,
    name: &str,
    ours: impl Fn() -> Arc<dyn ExecutionPlan>,
    ctx: &SessionContext,
    sql: &str,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(PARTITIONS)
        .build()
        .unwrap();
    let mut group = c.benchmark_group(name);
    group.sample_size(10);
    group.bench_function("oxidelake_cpu", |b| {
        b.iter(|| rt.block_on(async { collect(ours(), ctx.task_ctx()).await.unwrap() }))
    });
    group.bench_function("datafusion_stock", |b| {
        b.iter(|| rt.block_on(async { ctx.sql(sql).await.unwrap().collect().await.unwrap() }))
    });
    group.finish();
}

fn operators(c: &mut Criterion) {
    let data = partitions(rows(), 64);
    let ctx = context(&[("t", &data)]);

    let filter = || -> Arc<dyn ExecutionPlan> {
        let preds = vec![
            Predicate::from(ColumnPredicate {
                column: 1,
                op: CmpOp::Lt,
                literal: Literal::Int64(500),
            }),
            Predicate::from(ColumnPredicate {
                column: 2,
                op: CmpOp::GtEq,
                literal: Literal::Float64(10.0),
            }),
        ];
        Arc::new(
            GpuFilterExec::try_new(source(&data), preds, vec![0, 1], BackendKind::CpuSimd)
                .unwrap()
                .with_backend(cpu()),
        )
    };
    bench_pair(
        c,
        "filter_project_10m",
        filter,
        &ctx,
        "SELECT k, a FROM t WHERE a < 500 AND b >= 10.0",
    );

    // The stock plan with its partial aggregate on our CPU path (what the placement rule
    // makes of the query), against the stock plan.
    let aggregate_sql = "SELECT k, SUM(a), COUNT(a), MIN(b), MAX(b) FROM t GROUP BY k";
    let device_plan = with_device_partial(&ctx, aggregate_sql);
    let aggregate = || Arc::clone(&device_plan);
    bench_pair(c, "aggregate_10m", aggregate, &ctx, aggregate_sql);

    let vector = || -> Arc<dyn ExecutionPlan> {
        Arc::new(
            GpuVectorDistanceExec::try_new(
                source(&data),
                3,
                vec![1.0, 0.5, -1.0, 2.0],
                DistanceMetric::L2,
                "d",
                BackendKind::CpuSimd,
            )
            .unwrap()
            .with_backend(cpu()),
        )
    };
    bench_pair(
        c,
        "vector_l2_10m",
        vector,
        &ctx,
        "SELECT k, a, b, v, array_distance(v, [1.0, 0.5, -1.0, 2.0]) FROM t",
    );

    // Join: 10M probe rows against a 100k-row build side with unique keys (the key
    // formula is a permutation of 0..100k), so every probe row matches exactly once.
    let build = partitions(100_000, 100_000);
    let probe = partitions(rows(), 100_000);
    let jctx = context(&[("l", &build), ("r", &probe)]);
    let join = || -> Arc<dyn ExecutionPlan> {
        Arc::new(
            GpuHashJoinExec::try_new(source(&build), source(&probe), 0, 0, BackendKind::CpuSimd)
                .unwrap()
                .with_backend(cpu()),
        )
    };
    bench_pair(
        c,
        "hash_join_10m",
        join,
        &jctx,
        "SELECT * FROM l JOIN r ON l.k = r.k",
    );

    // The same join where only half of the probe rows find a partner (keys in 0..200k),
    // so output rows must be gathered from the probe side too.
    let half = partitions(rows(), 200_000);
    let hctx = context(&[("l", &build), ("r", &half)]);
    let half_join = || -> Arc<dyn ExecutionPlan> {
        Arc::new(
            GpuHashJoinExec::try_new(source(&build), source(&half), 0, 0, BackendKind::CpuSimd)
                .unwrap()
                .with_backend(cpu()),
        )
    };
    bench_pair(
        c,
        "hash_join_half_match_10m",
        half_join,
        &hctx,
        "SELECT * FROM l JOIN r ON l.k = r.k",
    );
}

criterion_group!(benches, operators);
criterion_main!(benches);
