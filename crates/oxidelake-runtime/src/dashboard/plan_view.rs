//! A running physical plan as the dashboard's operator list, with live figures from
//! DataFusion's metrics (which operators update while they run).

use std::sync::Arc;

use datafusion::physical_plan::metrics::MetricValue;
use datafusion::physical_plan::{ExecutionPlan, displayable};
use oxidelake_core::BackendKind;
use oxidelake_tui::{NodeStats, PlanNode};

/// The placement tag of a node: GPU operators print theirs as `Name[cuda]`, a spilling
/// join whose pairs run on a GPU as `pairs=GpuHashJoinExec[cuda]` in its details.
pub(crate) fn backend_of(line: &str) -> BackendKind {
    let (head, details) = line.split_once(':').unwrap_or((line, ""));
    let head = match details.split_once("pairs=") {
        Some((_, pairs)) if head == "GraceHashJoinExec" => pairs.split(',').next().unwrap_or(pairs),
        _ => head,
    };
    if head.ends_with("[cuda]") {
        BackendKind::Cuda
    } else {
        BackendKind::CpuSimd
    }
}

fn count(metrics: &datafusion::physical_plan::metrics::MetricsSet, name: &str) -> Option<u64> {
    metrics.sum_by_name(name).map(|v| match v {
        MetricValue::Count { count, .. } => count.value() as u64,
        other => other.as_usize() as u64,
    })
}

fn stats(node: &Arc<dyn ExecutionPlan>) -> NodeStats {
    node.metrics()
        .map_or_else(NodeStats::default, |m| stats_of(&m))
}

/// The figures of an operator's metrics (all partitions together).
pub(crate) fn stats_of(metrics: &datafusion::physical_plan::metrics::MetricsSet) -> NodeStats {
    let metrics = metrics.aggregate_by_name();
    NodeStats {
        rows_in: count(&metrics, "rows_in"),
        rows_out: metrics.output_rows().unwrap_or(0) as u64,
        // `sum_by_name` does not match the OutputBatches variant in DataFusion 55.
        batches: metrics
            .iter()
            .map(|m| match m.value() {
                MetricValue::OutputBatches(c) => c.value() as u64,
                _ => 0,
            })
            .sum(),
        busy_ns: metrics.elapsed_compute().unwrap_or(0) as u64,
        allocated_bytes: count(&metrics, "peak_mem_used").unwrap_or(0),
        bytes_moved: count(&metrics, "bytes_moved").unwrap_or(0),
        cpu_fallback_batches: count(&metrics, "cpu_fallback_batches").unwrap_or(0),
        device_errors: count(&metrics, "device_errors").unwrap_or(0),
        no_device: count(&metrics, "no_device").unwrap_or(0) > 0,
    }
}

/// The operators of `plan` in pre-order, with their current figures.
pub(crate) fn plan_nodes(plan: &Arc<dyn ExecutionPlan>) -> Vec<PlanNode> {
    let mut out = Vec::new();
    walk(plan, 0, &mut out);
    out
}

fn walk(node: &Arc<dyn ExecutionPlan>, depth: usize, out: &mut Vec<PlanNode>) {
    let line = displayable(node.as_ref()).one_line().to_string();
    let line = line.trim_end();
    let detail = line
        .split_once(": ")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or_default();
    out.push(PlanNode {
        depth,
        name: node.name().to_string(),
        detail,
        backend: backend_of(line),
        stats: stats(node),
    });
    for child in node.children() {
        walk(child, depth + 1, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placement_tags_are_read_from_the_node_line() {
        assert_eq!(
            backend_of("GpuFilterExec[cuda]: predicate=a < 1"),
            BackendKind::Cuda
        );
        assert_eq!(backend_of("FilterExec: a@0 < 1"), BackendKind::CpuSimd);
        assert_eq!(
            backend_of(
                "GraceHashJoinExec: fan_out=32, pairs=GpuHashJoinExec[cuda], HashJoinExec: \
                 mode=Partitioned"
            ),
            BackendKind::Cuda
        );
        assert_eq!(
            backend_of("GraceHashJoinExec: fan_out=32, HashJoinExec: mode=Partitioned"),
            BackendKind::CpuSimd
        );
    }
}
