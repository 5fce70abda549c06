//! HashJoinExec → GpuHashJoinExec: inner, semi and anti equi-joins on one Int64 key pair.
//!
//! The operator builds on its left input and emits probe rows for semi and anti joins.
//! A left semi or anti join (DataFusion keeps the left side as the build side when it
//! estimates it smaller) emits build rows instead, which needs a visited bitmap shared by
//! every probe partition — and, in a cluster, by tasks in other processes. So it is
//! placed as the right semi or anti join with the inputs swapped: the other side becomes
//! the build table (collected whole, as every build side is), and the same rows come
//! out. The price is a larger build table where DataFusion's estimate was right; a
//! partitioned join with per-partition bitmaps is the way to avoid it.

use std::sync::Arc;

use arrow::datatypes::DataType;
use datafusion::common::{JoinType, NullEquality};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use oxidelake_compute::GpuHashJoinExec;
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let join = node.downcast_ref::<HashJoinExec>()?;
    Some(match rewrite(join, backend) {
        Ok(plan) => Placement::Rewrite(plan),
        Err(reason) => Placement::Cpu(reason),
    })
}

fn rewrite(join: &HashJoinExec, backend: BackendKind) -> Result<Arc<dyn ExecutionPlan>, String> {
    let join_type = *join.join_type();
    if !matches!(
        join_type,
        JoinType::Inner
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
    if join.on().len() != 1 {
        return Err(format!("{} join keys", join.on().len()));
    }
    if join.filter().is_some() {
        return Err("join filter".into());
    }
    if join.null_equality() != NullEquality::NullEqualsNothing {
        return Err("NULL keys compare equal".into());
    }
    if join.fetch().is_some() {
        return Err("join with a row limit".into());
    }
    let (left_key, right_key) = &join.on()[0];
    let key = |expr: &Arc<dyn datafusion::physical_expr::PhysicalExpr>,
               schema: &arrow::datatypes::SchemaRef|
     -> Result<usize, String> {
        let column = expr
            .downcast_ref::<Column>()
            .ok_or_else(|| "join key is an expression".to_string())?;
        let dt = schema
            .fields()
            .get(column.index())
            .map(|f| f.data_type().clone())
            .ok_or_else(|| "join key out of range".to_string())?;
        if dt != DataType::Int64 {
            return Err(format!("join key on {dt}"));
        }
        Ok(column.index())
    };
    let l = key(left_key, &join.left().schema())?;
    let r = key(right_key, &join.right().schema())?;
    let (left, right) = (Arc::clone(join.left()), Arc::clone(join.right()));
    // A left semi/anti join is the right one with the inputs swapped (module docs): its
    // output, the left input's rows, is then the probe side's.
    let (build, probe, build_key, probe_key, device_type) = match join_type {
        JoinType::LeftSemi => (right, left, r, l, JoinType::RightSemi),
        JoinType::LeftAnti => (right, left, r, l, JoinType::RightAnti),
        other => (left, right, l, r, other),
    };
    let gpu: Arc<dyn ExecutionPlan> = Arc::new(
        GpuHashJoinExec::try_new_with_type(
            build,
            probe,
            build_key,
            probe_key,
            device_type,
            backend,
        )
        .map_err(reason_of)?,
    );
    let Some(projection) = join.projection.as_ref() else {
        return Ok(gpu);
    };
    // The join carried an embedded projection: keep it as a ProjectionExec above.
    let schema = gpu.schema();
    let exprs: Vec<(Arc<dyn datafusion::physical_expr::PhysicalExpr>, String)> = projection
        .iter()
        .map(|i| {
            let name = schema.field(*i).name().clone();
            (
                Arc::new(Column::new(&name, *i))
                    as Arc<dyn datafusion::physical_expr::PhysicalExpr>,
                name,
            )
        })
        .collect();
    Ok(Arc::new(
        ProjectionExec::try_new(exprs, gpu).map_err(reason_of)?,
    ))
}
