//! A ProjectionExec computing arithmetic → GpuProjectionExec (ADR-0010).
//!
//! Only projections that compute something are candidates: a projection of columns and
//! literals (a reorder, a rename, a constant) has no work for a device and is left alone
//! without a reason.
//! Vector distances are the vector module's.

use std::sync::Arc;

use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::projection::ProjectionExec;
use oxidelake_compute::{GpuProjectionExec, is_constant};
use oxidelake_core::BackendKind;

use super::{Placement, reason_of};

/// Whether `projection` computes at least one expression (columns, literals and scalar
/// subqueries are not computed).
pub(crate) fn computes(projection: &ProjectionExec) -> bool {
    projection
        .expr()
        .iter()
        .any(|p| !p.expr.is::<Column>() && !is_constant(&p.expr))
}

pub(super) fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    let projection = node.downcast_ref::<ProjectionExec>()?;
    if !computes(projection) {
        return None;
    }
    Some(
        match GpuProjectionExec::try_new(
            projection.expr().to_vec(),
            Arc::clone(projection.input()),
            backend,
        ) {
            Ok(gpu) => Placement::Rewrite(Arc::new(gpu)),
            Err(err) => Placement::Cpu(reason_of(err)),
        },
    )
}
