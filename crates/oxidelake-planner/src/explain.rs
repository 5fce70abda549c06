//! EXPLAIN with placement: the physical plan, one node a line, where every node that
//! looks eligible for a GPU operator but stayed on the CPU says why.

use std::fmt::Write;
use std::sync::Arc;

use datafusion::physical_plan::{ExecutionPlan, displayable};
use oxidelake_core::BackendKind;

use crate::eligibility::{Placement, place};

/// Why nothing was placed on a GPU, when the target resolved to the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuTarget {
    /// `oxidelake.placement.target = cpu`.
    Requested,
    /// `auto` on a machine without a GPU.
    NoGpuDetected,
}

/// Renders `plan` with placement annotations. `backend` is what the plan was placed
/// for (`Err` when that resolved to the CPU, and why).
pub fn explain_with_placement(
    plan: &Arc<dyn ExecutionPlan>,
    backend: Result<BackendKind, CpuTarget>,
) -> String {
    let mut out = String::new();
    render(plan, backend, 0, &mut out);
    out
}

fn render(
    node: &Arc<dyn ExecutionPlan>,
    backend: Result<BackendKind, CpuTarget>,
    depth: usize,
    out: &mut String,
) {
    let line = displayable(node.as_ref()).one_line().to_string();
    let _ = write!(out, "{:indent$}{}", "", line.trim_end(), indent = depth * 2);
    let probe_backend = backend.unwrap_or(BackendKind::Cuda);
    match (place(node, probe_backend), backend) {
        (Some(Placement::Cpu(reason)), _) => {
            let _ = write!(out, " [cpu: {reason}]");
        }
        (Some(Placement::Rewrite(_)), Err(CpuTarget::Requested)) => {
            out.push_str(" [cpu: placement target is cpu]");
        }
        (Some(Placement::Rewrite(_)), Err(CpuTarget::NoGpuDetected)) => {
            out.push_str(" [cpu: no GPU detected]");
        }
        _ => {}
    }
    out.push('\n');
    for child in node.children() {
        render(child, backend, depth + 1, out);
    }
}
