//! Plan properties: each Gpu*Exec reports the output partitioning, equivalences and
//! ordering of the stock operator it replaces. DataFusion decides from them where to
//! repartition and sort; a wrong claim silently drops a repartition a parent needs (the
//! probe side's hash partitioning reported on the build side's columns once made a
//! self-join's parent aggregate skip its repartition and return split groups).

use std::sync::Arc;

use arrow::compute::SortOptions;
use datafusion::common::{JoinType, NullEquality};
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{LexOrdering, Partitioning, PhysicalExpr, PhysicalSortExpr};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::filter::FilterExecBuilder;
use datafusion::physical_plan::joins::{HashJoinExecBuilder, PartitionMode};
use datafusion::physical_plan::repartition::RepartitionExec;
use datafusion::physical_plan::sorts::sort::SortExec;
use oxidelake_compute::ops::{CmpOp, ColumnPredicate, Literal, Predicate};
use oxidelake_compute::{GpuFilterExec, GpuHashJoinExec};
use oxidelake_core::BackendKind;

use super::data::{self, Rng};

fn col(name: &str, index: usize) -> Arc<dyn PhysicalExpr> {
    Arc::new(Column::new(name, index))
}

fn scan(seed: u64) -> Arc<dyn ExecutionPlan> {
    let parts = data::partitions(&mut Rng::new(seed), 8);
    MemorySourceConfig::try_new_exec(&parts, data::schema(), None).unwrap()
}

/// A scan hash-partitioned on `a` (column 1), as an aggregate's output would be.
fn hashed_on_a(seed: u64) -> Arc<dyn ExecutionPlan> {
    Arc::new(
        RepartitionExec::try_new(scan(seed), Partitioning::Hash(vec![col("a", 1)], 4)).unwrap(),
    )
}

fn hash_columns(p: &Partitioning) -> Vec<(String, usize)> {
    match p {
        Partitioning::Hash(exprs, _) => exprs
            .iter()
            .map(|e| {
                let c = e.downcast_ref::<Column>().unwrap();
                (c.name().to_string(), c.index())
            })
            .collect(),
        other => panic!("expected hash partitioning, got {other:?}"),
    }
}

#[test]
fn a_self_join_reports_the_probe_partitioning_shifted_past_the_build_columns() {
    // Both sides have the same column names (k, a, b, c, v): an unshifted `a@1` would
    // name the *build* side's `a`.
    let (left, right) = (scan(1), hashed_on_a(2));
    let gpu = GpuHashJoinExec::try_new(
        Arc::clone(&left),
        Arc::clone(&right),
        0,
        0,
        BackendKind::Cuda,
    )
    .unwrap();
    let stock = HashJoinExecBuilder::new(
        left,
        right,
        vec![(col("k", 0), col("k", 0))],
        JoinType::Inner,
    )
    .with_partition_mode(PartitionMode::CollectLeft)
    .with_null_equality(NullEquality::NullEqualsNothing)
    .build()
    .unwrap();
    let build_columns = data::schema().fields().len();
    assert_eq!(
        hash_columns(gpu.properties().output_partitioning()),
        vec![("a".to_string(), build_columns + 1)]
    );
    assert_eq!(
        format!("{:?}", gpu.properties().output_partitioning()),
        format!("{:?}", stock.properties().output_partitioning())
    );
    assert_eq!(gpu.maintains_input_order(), stock.maintains_input_order());
    assert_eq!(
        format!("{:?}", gpu.properties().equivalence_properties().eq_group()),
        format!(
            "{:?}",
            stock.properties().equivalence_properties().eq_group()
        )
    );
}

fn gt(column: usize, v: i64) -> Vec<Predicate> {
    vec![Predicate::Compare(ColumnPredicate {
        column,
        op: CmpOp::Gt,
        literal: Literal::Int64(v),
    })]
}

#[test]
fn a_filter_whose_projection_reorders_columns_reports_partitioning_on_the_new_indices() {
    // Output columns (a, k): the input's hash partitioning on a@1 is a@0 after it.
    let gpu =
        GpuFilterExec::try_new(hashed_on_a(3), gt(0, 2), vec![1, 0], BackendKind::Cuda).unwrap();
    assert_eq!(
        hash_columns(gpu.properties().output_partitioning()),
        vec![("a".to_string(), 0)]
    );
}

#[test]
fn a_filter_over_sorted_input_keeps_the_ordering_filter_exec_reports() {
    let ordering = LexOrdering::new(vec![PhysicalSortExpr::new(
        col("a", 1),
        SortOptions::default(),
    )])
    .unwrap();
    let sorted: Arc<dyn ExecutionPlan> =
        Arc::new(SortExec::new(ordering, scan(4)).with_preserve_partitioning(true));
    let predicate = gt(1, 3);
    let gpu = GpuFilterExec::try_new(
        Arc::clone(&sorted),
        predicate,
        vec![1, 2],
        BackendKind::Cuda,
    )
    .unwrap();
    let stock = FilterExecBuilder::new(
        Arc::new(datafusion::physical_expr::expressions::BinaryExpr::new(
            col("a", 1),
            datafusion::logical_expr::Operator::Gt,
            Arc::new(datafusion::physical_expr::expressions::Literal::new(
                datafusion::common::ScalarValue::Int64(Some(3)),
            )),
        )),
        sorted,
    )
    .apply_projection(Some(vec![1, 2]))
    .unwrap()
    .build()
    .unwrap();
    let ours = gpu.properties().output_ordering().cloned();
    assert!(
        ours.is_some(),
        "the sort order on a must survive the filter"
    );
    assert_eq!(
        format!("{ours:?}"),
        format!("{:?}", stock.properties().output_ordering())
    );
    assert_eq!(gpu.maintains_input_order(), vec![true]);
}
