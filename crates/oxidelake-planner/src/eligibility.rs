//! Which DataFusion nodes the GPU operators can replace, and why the others cannot.
//!
//! Every check returns either the replacement plan or the reason the node stays on the
//! CPU, in a few words (`predicate on Utf8`, `2 join keys`), which EXPLAIN prints.

mod aggregate;

pub(crate) use aggregate::fed_by_device_partial;
pub(crate) use projection::computes;
mod filter;
mod join;
mod projection;
mod vector;

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::aggregates::AggregateExec;
use datafusion::physical_plan::filter::FilterExec;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::projection::ProjectionExec;
use oxidelake_core::BackendKind;

use crate::CpuOperators;

/// What the placement rule does with one node.
#[derive(Debug, Clone)]
pub enum Placement {
    /// Replace the node with this plan (GPU operators, possibly under a projection).
    Rewrite(Arc<dyn ExecutionPlan>),
    /// Keep the node on the CPU, for this reason.
    Cpu(String),
}

/// The placement of `node` for `backend`, or `None` when the node is not one the GPU
/// operators could cover at all (scans, sorts, repartitions, ...).
pub fn place(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<Placement> {
    filter::place(node, backend)
        .or_else(|| join::place(node, backend))
        .or_else(|| aggregate::place(node, backend))
        .or_else(|| vector::place(node, backend))
        .or_else(|| projection::place(node, backend))
}

/// `node` as one of our operators placed for the CPU, where its kind is one of `kinds`
/// (`oxidelake.placement.cpu_operators`): the rewrite a GPU placement makes, run by the
/// operator's CPU path. The spilling grace join keeps its stock pairs.
pub fn place_on_cpu(node: &Arc<dyn ExecutionPlan>, kinds: CpuOperators) -> Option<Placement> {
    let cpu = BackendKind::CpuSimd;
    let placed = if node.is::<FilterExec>() {
        kinds.filter.then(|| filter::place(node, cpu))
    } else if node.is::<HashJoinExec>() {
        kinds.join.then(|| join::place(node, cpu))
    } else if node.is::<AggregateExec>() {
        kinds.aggregate.then(|| aggregate::place(node, cpu))
    } else if node.is::<ProjectionExec>() {
        kinds.projection.then(|| projection::place(node, cpu))
    } else {
        None
    };
    placed.flatten()
}

/// The reason a node stays on the CPU, if it is an eligible-looking one.
pub fn cpu_reason(node: &Arc<dyn ExecutionPlan>, backend: BackendKind) -> Option<String> {
    match place(node, backend)? {
        Placement::Cpu(reason) => Some(reason),
        Placement::Rewrite(_) => None,
    }
}

/// Turns a construction error of a GPU node into a CPU reason.
fn reason_of(err: datafusion::error::DataFusionError) -> String {
    let text = err.to_string();
    let text = text.rsplit(": ").next().unwrap_or(&text);
    text.chars().take(80).collect()
}
