//! What the dashboard shows: a plan, per-node figures, column statistics and the
//! engine's telemetry. Plain data, filled by whoever runs the query.

use oxidelake_core::{BackendKind, TelemetrySnapshot};

/// Figures of one plan node (DataFusion's metrics and OxideLake's telemetry combined).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// Rows consumed (`None` where the operator does not report it).
    pub rows_in: Option<u64>,
    /// Rows produced.
    pub rows_out: u64,
    /// Batches produced.
    pub batches: u64,
    /// Time spent computing, in nanoseconds.
    pub busy_ns: u64,
    /// Memory currently held, in bytes.
    pub allocated_bytes: u64,
    /// Bytes copied between host and device.
    pub bytes_moved: u64,
    /// Batches a GPU-placed operator ran on the CPU instead (refused, failed, or no
    /// GPU on this machine).
    pub cpu_fallback_batches: u64,
    /// Batches the device failed before the CPU ran them.
    pub device_errors: u64,
    /// Placed for a GPU, running on a machine whose detector found none.
    pub no_device: bool,
}

impl NodeStats {
    /// Mean compute time per batch in milliseconds (0 before the first batch).
    pub fn batch_latency_ms(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.batches as f64 / 1e6
        }
    }
}

/// One operator of the physical plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanNode {
    /// Depth in the tree (0 = root).
    pub depth: usize,
    /// Operator name, e.g. `GpuFilterExec`.
    pub name: String,
    /// The rest of the operator's one-line description.
    pub detail: String,
    /// Where it runs.
    pub backend: BackendKind,
    /// Its figures so far.
    pub stats: NodeStats,
}

/// Statistics of one result column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnStats {
    /// Column name.
    pub name: String,
    /// Smallest value, formatted.
    pub min: String,
    /// Largest value, formatted.
    pub max: String,
    /// NULLs.
    pub null_count: u64,
    /// 25th, 50th and 99th percentiles, formatted ("-" for non-numeric columns).
    pub p25: String,
    /// Median.
    pub p50: String,
    /// 99th percentile.
    pub p99: String,
}

/// Capacities the memory gauges are drawn against (0 = unknown: the gauge shows bytes
/// only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Capacities {
    /// Device memory.
    pub vram_bytes: u64,
    /// The host memory limit of the query's operators (`--memory-limit`).
    pub host_bytes: u64,
    /// Pinned host memory budget.
    pub pinned_bytes: u64,
    /// Spill directory budget.
    pub disk_bytes: u64,
}

/// Where the query is.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum QueryStatus {
    /// Nothing submitted.
    #[default]
    Idle,
    /// Executing, for this long so far.
    Running {
        /// Milliseconds since the start.
        elapsed_ms: u64,
    },
    /// Done.
    Finished {
        /// Total milliseconds.
        elapsed_ms: u64,
        /// Result rows.
        rows: u64,
    },
    /// Failed with this message.
    Failed(String),
}

/// A batch of new data for the dashboard; `None` fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    /// A new plan (replaces the old one; the selection is kept where possible).
    pub plan: Option<Vec<PlanNode>>,
    /// A new telemetry snapshot.
    pub telemetry: Option<TelemetrySnapshot>,
    /// New column statistics.
    pub columns: Option<Vec<ColumnStats>>,
    /// The query's status.
    pub status: Option<QueryStatus>,
}

/// The name of a backend in tags.
fn backend_name(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::CpuSimd => "CPU",
        BackendKind::Cuda => "CUDA",
    }
}

/// The tag of a backend: where an operator was placed.
pub fn hardware_tag(kind: BackendKind) -> &'static str {
    match kind {
        BackendKind::CpuSimd => "[CPU]",
        BackendKind::Cuda => "[CUDA]",
    }
}

/// The tag shown next to an operator: where it was placed and, when that differs,
/// where its batches ran: `[CUDA→CPU: no GPU]` on a machine without one,
/// `[CUDA→CPU: device error]` after the device failed, `[CUDA, 3 batches on CPU]` when
/// the device refused some batches.
pub fn placement_tag(node: &PlanNode) -> String {
    let s = &node.stats;
    let placed = backend_name(node.backend);
    if node.backend == BackendKind::CpuSimd {
        return hardware_tag(node.backend).to_string();
    }
    if s.no_device {
        format!("[{placed}→CPU: no GPU]")
    } else if s.device_errors > 0 {
        format!("[{placed}→CPU: device error]")
    } else if s.cpu_fallback_batches > 0 {
        let n = s.cpu_fallback_batches;
        format!(
            "[{placed}, {n} batch{} on CPU]",
            if n == 1 { "" } else { "es" }
        )
    } else {
        hardware_tag(node.backend).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(backend: BackendKind, stats: NodeStats) -> PlanNode {
        PlanNode {
            depth: 0,
            name: "GpuFilterExec".into(),
            detail: String::new(),
            backend,
            stats,
        }
    }

    #[test]
    fn the_tag_says_where_batches_ran_when_it_is_not_where_they_were_placed() {
        let ran = |stats| placement_tag(&node(BackendKind::Cuda, stats));
        assert_eq!(ran(NodeStats::default()), "[CUDA]");
        let no_gpu = NodeStats {
            no_device: true,
            cpu_fallback_batches: 10,
            ..NodeStats::default()
        };
        assert_eq!(ran(no_gpu), "[CUDA→CPU: no GPU]");
        let failed = NodeStats {
            device_errors: 1,
            cpu_fallback_batches: 4,
            ..NodeStats::default()
        };
        assert_eq!(ran(failed), "[CUDA→CPU: device error]");
        let refused = NodeStats {
            cpu_fallback_batches: 3,
            ..NodeStats::default()
        };
        assert_eq!(ran(refused), "[CUDA, 3 batches on CPU]");
        assert_eq!(
            placement_tag(&node(BackendKind::CpuSimd, NodeStats::default())),
            "[CPU]"
        );
    }
}
