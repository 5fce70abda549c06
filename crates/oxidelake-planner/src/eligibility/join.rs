//! HashJoinExec → GpuHashJoinExec: inner, semi and anti equi-joins on key columns of one
//! integer, decimal, date, timestamp, boolean or string type per pair, with or without a
//! join filter (which the operator applies to the key-matched pairs on the host). Inner,
//! right outer, semi and anti joins; a left outer join becomes the right outer join with
//! the inputs swapped (each unmatched probe row is emitted with its batch, no state
//! across probe partitions) whose own projection restores the column order. The stock
//! join's embedded projection becomes the GPU join's, so unread columns are never
//! gathered.
//!
//! The operator builds on its left input and emits probe rows for semi and anti joins.
//! A left semi or anti join (DataFusion keeps the left side as the build side when it
//! estimates it smaller) emits build rows instead, which needs a visited bitmap shared by
//! every probe partition — and, in a cluster, by tasks in other processes. So it is
//! placed as the right semi or anti join with the inputs swapped: the other side becomes
//! the build table, and the same rows come out. That is only done where the swap does not
//! build on the larger input by the plan's row estimates (or where there are none):
//! DataFusion's join selection leaves a join left semi, anti or outer when it estimates
//! the left input smaller, so swapping against the estimate builds a table of the larger
//! side and gives up the dynamic filter the small build side would have sent to the
//! large one. (TPC-H Q21's `EXISTS` built all 6 million lineitem rows instead of 76,000,
//! 103 ms against 10; with the join filter lost as well, Q21 took 1.42× as long.) Those
//! joins stay on the CPU, EXPLAIN saying why; per-partition visited bitmaps would let
//! them run unswapped.
//!
//! The GPU join keeps the stock join's partition mode: CollectLeft builds one table from
//! the whole build side, Partitioned one per hash partition (swapping the inputs keeps
//! them co-partitioned, since both sides are partitioned on their keys).

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::projection::ProjectionExec;
use datafusion::physical_plan::{ExecutionPlan, StatisticsArgs, StatisticsContext};
use oxidelake_compute::{
    GpuHashJoinExec, GraceHashJoinExec, PairJoin, numbered_key_type, placement_label,
};
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    if let Some(grace) = node.downcast_ref::<GraceHashJoinExec>() {
        // Under a memory or device limit (`GraceJoinRule`, which runs first).
        return Some(match grace_on_device(grace, backend) {
            Ok(plan) => Placement::Rewrite(plan),
            Err(reason) => Placement::Cpu(format!("spilling join: {reason}")),
        });
    }
    let join = node.downcast_ref::<HashJoinExec>()?;
    Some(match rewrite(join, backend, false) {
        Ok(plan) => Placement::Rewrite(plan),
        Err(reason) => Placement::Cpu(reason),
    })
}

/// The GPU join replacing `join` (under a column-restoring projection where the inputs
/// swap), or why it cannot; `build_claimed` when its runner holds the build side's device
/// claim (a grace join's pair).
fn rewrite(
    join: &HashJoinExec,
    backend: BackendKind,
    build_claimed: bool,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let join_type = *join.join_type();
    if !matches!(
        join_type,
        JoinType::Inner
            | JoinType::Left
            | JoinType::Right
            | JoinType::RightSemi
            | JoinType::RightAnti
            | JoinType::LeftSemi
            | JoinType::LeftAnti
    ) {
        return Err(format!("{join_type} join"));
    }
    if join.null_aware {
        return Err("null-aware anti join (NOT IN)".into());
    }
    if join.null_equality() != NullEquality::NullEqualsNothing {
        return Err("NULL keys compare equal".into());
    }
    if join.fetch().is_some() {
        return Err("join with a row limit".into());
    }
    let (ls, rs) = (join.left().schema(), join.right().schema());
    let mut on = Vec::with_capacity(join.on().len());
    for (left_key, right_key) in join.on() {
        let (l, lt) = key_column(left_key, &ls)?;
        let (r, rt) = key_column(right_key, &rs)?;
        if lt != rt {
            return Err(format!("join key {lt} = {rt}"));
        }
        if !numbered_key_type(&lt) {
            return Err(format!("join key on {lt}"));
        }
        on.push((l, r));
    }
    if matches!(
        join_type,
        JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti
    ) && swap_builds_the_larger_side(join)
    {
        return Err(format!(
            "{join_type} join: swapped, it would build on its larger input (by the row estimates)"
        ));
    }
    let (left, right) = (Arc::clone(join.left()), Arc::clone(join.right()));
    let filter = join.filter().cloned();
    // A left semi/anti join is the right one with the inputs swapped (module docs): its
    // output, the left input's rows, is then the probe side's, and the filter's sides
    // swap with the inputs.
    let swapped = |on: Vec<(usize, usize)>| on.into_iter().map(|(l, r)| (r, l)).collect();
    let (build, probe, on, filter, device_type) = match join_type {
        JoinType::LeftSemi => (
            right,
            left,
            swapped(on),
            filter.map(|f| f.swap()),
            JoinType::RightSemi,
        ),
        JoinType::LeftAnti => (
            right,
            left,
            swapped(on),
            filter.map(|f| f.swap()),
            JoinType::RightAnti,
        ),
        // A left outer join emits each unmatched left row once, which a probe side can
        // do per batch: the left input becomes the probe side of a right join.
        JoinType::Left => (
            right,
            left,
            swapped(on),
            filter.map(|f| f.swap()),
            JoinType::Right,
        ),
        other => (left, right, on, filter, other),
    };
    // Auto is resolved while planning; were it left, CollectLeft is always correct.
    let mode = match *join.partition_mode() {
        PartitionMode::Partitioned => PartitionMode::Partitioned,
        _ => PartitionMode::CollectLeft,
    };
    let (left_width, right_width) = (ls.fields().len(), rs.fields().len());
    let gpu =
        GpuHashJoinExec::try_new_in_mode(build, probe, on, filter, device_type, mode, backend)
            .map_err(reason_of)?;
    let gpu = match build_claimed {
        true => gpu.with_build_claimed_by_caller(),
        false => gpu,
    };
    let width = gpu.schema().fields().len();
    // Which GPU output column each column of the stock join's output (before its
    // embedded projection) is: the same one, or for the swapped left join, the left
    // input's columns that now come after the right input's.
    let mut order: Vec<usize> = if join_type == JoinType::Left {
        (right_width..right_width + left_width)
            .chain(0..right_width)
            .collect()
    } else {
        (0..width).collect()
    };
    if let Some(projection) = join.projection.as_ref() {
        order = projection.iter().map(|i| order[*i]).collect();
    }
    if order.iter().copied().eq(0..width) {
        return Ok(Arc::new(gpu));
    }
    // The stock join's output columns and order as the GPU join's own projection, so
    // that columns nobody reads are never gathered.
    let gpu: Arc<dyn ExecutionPlan> =
        Arc::new(gpu.with_projection(Some(order)).map_err(reason_of)?);
    let (schema, out) = (gpu.schema(), join.schema());
    if schema
        .fields()
        .iter()
        .map(|f| f.name())
        .eq(out.fields().iter().map(|f| f.name()))
    {
        return Ok(gpu);
    }
    // Names that differ (none known today): a ProjectionExec renames them.
    let exprs: Vec<(Arc<dyn datafusion::physical_expr::PhysicalExpr>, String)> = out
        .fields()
        .iter()
        .enumerate()
        .map(|(i, field)| {
            (
                Arc::new(Column::new(schema.field(i).name(), i))
                    as Arc<dyn datafusion::physical_expr::PhysicalExpr>,
                field.name().clone(),
            )
        })
        .collect();
    Ok(Arc::new(
        ProjectionExec::try_new(exprs, gpu).map_err(reason_of)?,
    ))
}

/// The spilling join with its pairs joined on the device: each pair (and a build side
/// that fits) is the stock join in CollectLeft mode over build rows the grace join has
/// measured against the memory pool and the device budget, so only the join types the
/// GPU join builds on the left input of qualify; the left outer, semi and anti joins it
/// runs with the inputs swapped would build on the unmeasured probe side.
fn grace_on_device(
    grace: &GraceHashJoinExec,
    backend: BackendKind,
) -> Result<Arc<dyn ExecutionPlan>, String> {
    let join = grace.join();
    let join_type = *join.join_type();
    if matches!(
        join_type,
        JoinType::Left | JoinType::LeftSemi | JoinType::LeftAnti
    ) {
        return Err(format!(
            "{join_type} join (the GPU join would build on the probe side)"
        ));
    }
    rewrite(join, backend, false)?;
    let grace = GraceHashJoinExec::try_new(Arc::clone(join))
        .map_err(reason_of)?
        .with_device_limit(grace.device_limit())
        .with_pairs(Arc::new(DevicePairJoin { backend }));
    Ok(Arc::new(grace))
}

/// Joins a grace join's pairs with the GPU join.
#[derive(Debug)]
struct DevicePairJoin {
    backend: BackendKind,
}

impl PairJoin for DevicePairJoin {
    fn plan(&self, join: HashJoinExec) -> datafusion::error::Result<Arc<dyn ExecutionPlan>> {
        // The grace join holds the pair's device claim: the pair claims nothing more.
        rewrite(&join, self.backend, true).map_err(|reason| {
            datafusion::error::DataFusionError::Plan(format!(
                "a spilled pair cannot be joined by {}: {reason}",
                self.label()
            ))
        })
    }

    fn label(&self) -> String {
        placement_label("GpuHashJoinExec", self.backend)
    }
}

/// Whether `join`'s right input is estimated to hold more rows than its left one, so that
/// running it with the inputs swapped would build on the larger side. No estimate for
/// either side: no.
fn swap_builds_the_larger_side(join: &HashJoinExec) -> bool {
    let context = StatisticsContext::new();
    let args = StatisticsArgs::new();
    let rows = |plan: &Arc<dyn ExecutionPlan>| {
        context
            .compute(plan.as_ref(), &args)
            .ok()
            .and_then(|s| s.num_rows.get_value().copied())
    };
    matches!(
        (rows(join.left()), rows(join.right())),
        (Some(left), Some(right)) if right > left
    )
}

/// A key's column index and type, or why it is not covered.
fn key_column(
    expr: &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
    schema: &arrow::datatypes::SchemaRef,
) -> Result<(usize, DataType), String> {
    let column = expr
        .downcast_ref::<Column>()
        .ok_or_else(|| "join key is an expression".to_string())?;
    let dt = schema
        .fields()
        .get(column.index())
        .map(|f| f.data_type().clone())
        .ok_or_else(|| "join key out of range".to_string())?;
    Ok((column.index(), dt))
}
