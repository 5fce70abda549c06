//! `GpuHashJoinExec` in Partitioned mode: output partition `i` builds from left partition
//! `i` alone, states the stock operator's input requirements, and returns the stock
//! partitioned join's rows.

use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::{JoinType, NullEquality};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{Partitioning, PhysicalExpr};
use datafusion::physical_plan::joins::{HashJoinExecBuilder, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::{ExecutionPlan, collect, collect_partitioned};
use oxidelake_compute::GpuHashJoinExec;
use oxidelake_core::BackendKind;

use super::data::{self, Rng};
use super::plans::cpu;
use super::rows::sorted_rows;

fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, true),
        Field::new("s", DataType::Utf8, true),
    ]))
}

fn batch(keys: &[i64], text: &str) -> RecordBatch {
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(keys.to_vec())) as ArrayRef,
            Arc::new(StringArray::from(vec![text; keys.len()])),
        ],
    )
    .unwrap()
}

fn join(
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    on: Vec<(usize, usize)>,
    join_type: JoinType,
    mode: PartitionMode,
) -> GpuHashJoinExec {
    GpuHashJoinExec::try_new_in_mode(left, right, on, None, join_type, mode, BackendKind::Cuda)
        .unwrap()
        .with_backend(cpu())
}

#[tokio::test]
async fn in_partitioned_mode_each_partition_joins_only_its_own_build_partition() {
    // Both build partitions hold keys 1 and 2. Partitioned, probe partition 0 meets only
    // build partition 0: one match per probe row. CollectLeft would meet both: two.
    let left: Arc<dyn ExecutionPlan> = MemorySourceConfig::try_new_exec(
        &[
            vec![batch(&[1, 2], "left 0")],
            vec![batch(&[1, 2], "left 1")],
        ],
        schema(),
        None,
    )
    .unwrap();
    let right: Arc<dyn ExecutionPlan> = MemorySourceConfig::try_new_exec(
        &[
            vec![batch(&[1, 1, 2], "right 0")],
            vec![batch(&[], "right 1")],
        ],
        schema(),
        None,
    )
    .unwrap();
    let ctx = Arc::new(TaskContext::default());
    let count = |mode| {
        let exec = join(
            Arc::clone(&left),
            Arc::clone(&right),
            vec![(0, 0)],
            JoinType::Inner,
            mode,
        );
        let ctx = Arc::clone(&ctx);
        async move {
            let parts = collect_partitioned(Arc::new(exec), ctx).await.unwrap();
            parts
                .iter()
                .map(|p| p.iter().map(RecordBatch::num_rows).sum::<usize>())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(count(PartitionMode::Partitioned).await, vec![3, 0]);
    assert_eq!(count(PartitionMode::CollectLeft).await, vec![6, 0]);
    // Only left partition 0's rows reach partition 0's output.
    let exec = join(
        Arc::clone(&left),
        Arc::clone(&right),
        vec![(0, 0)],
        JoinType::Inner,
        PartitionMode::Partitioned,
    );
    let out = collect(Arc::new(exec), Arc::clone(&ctx)).await.unwrap();
    let texts: Vec<String> = sorted_rows(&out)
        .into_iter()
        .map(|r| format!("{:?}", r[1]))
        .collect();
    assert!(texts.iter().all(|t| t.contains("left 0")), "{texts:?}");
}

fn col(name: &str, index: usize) -> Arc<dyn PhysicalExpr> {
    Arc::new(Column::new(name, index))
}

/// A random scan hash-partitioned on its key `k` into 3 partitions.
fn hashed_on_k(seed: u64) -> Arc<dyn ExecutionPlan> {
    let parts = data::partitions(&mut Rng::new(seed), 500);
    let scan = MemorySourceConfig::try_new_exec(&parts, data::schema(), None).unwrap();
    Arc::new(RepartitionExec::try_new(scan, Partitioning::Hash(vec![col("k", 0)], 3)).unwrap())
}

#[tokio::test]
async fn a_partitioned_join_states_the_stock_requirements_and_returns_the_stock_rows() {
    for join_type in [
        JoinType::Inner,
        JoinType::Right,
        JoinType::RightSemi,
        JoinType::RightAnti,
    ] {
        for seed in 1..=4 {
            // A RepartitionExec runs each partition once: one pair of inputs per join.
            let gpu = join(
                hashed_on_k(seed),
                hashed_on_k(seed + 100),
                vec![(0, 0)],
                join_type,
                PartitionMode::Partitioned,
            );
            let stock = HashJoinExecBuilder::new(
                hashed_on_k(seed),
                hashed_on_k(seed + 100),
                vec![(col("k", 0), col("k", 0))],
                join_type,
            )
            .with_partition_mode(PartitionMode::Partitioned)
            .with_null_equality(NullEquality::NullEqualsNothing)
            .build()
            .unwrap();
            assert_eq!(
                format!("{:?}", gpu.input_distribution_requirements()),
                format!("{:?}", stock.input_distribution_requirements()),
                "{join_type}"
            );
            assert_eq!(
                format!("{:?}", gpu.properties().output_partitioning()),
                format!("{:?}", stock.properties().output_partitioning()),
                "{join_type}"
            );
            let ctx = Arc::new(TaskContext::default());
            let ours = collect(Arc::new(gpu), Arc::clone(&ctx)).await.unwrap();
            let theirs = collect(Arc::new(stock), ctx).await.unwrap();
            // As text, so that NaN equals NaN.
            let text = |batches| -> Vec<String> {
                sorted_rows(batches)
                    .iter()
                    .map(|row| format!("{row:?}"))
                    .collect()
            };
            let (ours, theirs) = (text(&ours), text(&theirs));
            if ours != theirs {
                let first = ours.iter().zip(&theirs).position(|(a, b)| a != b);
                panic!(
                    "{join_type}, seed {seed}: {} rows here, {} stock; first difference at {first:?}: {:?} vs {:?}",
                    ours.len(),
                    theirs.len(),
                    first.map(|i| &ours[i]),
                    first.map(|i| &theirs[i])
                );
            }
        }
    }
}
