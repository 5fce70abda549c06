//! What a transition counts (copies, staging buffers, rows) and how it waits for a copy.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder};
use oxidelake_core::BackendKind;
use oxidelake_device::device_batch::StagingPool;

use crate::exec_support::{ExecBackend, OperatorMetrics};

/// Idle staging buffers a transition keeps per partition (more than the batches in
/// flight at once).
pub(super) const PARKED_STAGING: usize = 4;

/// Copies and bytes of one transition, beside the operator metrics.
pub(super) struct TransitionMetrics {
    pub(super) operator: OperatorMetrics,
    copies: Count,
    /// Staging buffers allocated (the rest of the copies reused a parked one).
    staging_allocations: Count,
    /// The pool's allocation count already added to `staging_allocations` (copies run
    /// concurrently, so each reports the pool's growth since the last report).
    staging_reported: AtomicUsize,
}

impl TransitionMetrics {
    pub(super) fn new(
        set: &ExecutionPlanMetricsSet,
        partition: usize,
        name: &str,
        placement: BackendKind,
        exec: &ExecBackend,
    ) -> Self {
        Self {
            operator: OperatorMetrics::new(set, partition, name, placement, exec),
            copies: MetricBuilder::new(set).counter("copies", partition),
            staging_allocations: MetricBuilder::new(set).counter("staging_allocations", partition),
            staging_reported: AtomicUsize::new(0),
        }
    }

    /// One batch copied through `pool`: `bytes` count as moved on a device, not on the
    /// CPU backend (whose "device" is host memory), as for every operator.
    pub(super) fn record(
        &self,
        exec: &ExecBackend,
        rows: usize,
        started: Instant,
        bytes: usize,
        pool: &StagingPool,
    ) {
        self.copies.add(1);
        let allocated = pool.allocated();
        let reported = self
            .staging_reported
            .fetch_max(allocated, Ordering::Relaxed);
        self.staging_allocations
            .add(allocated.saturating_sub(reported));
        let moved = exec.bytes_moved(|| bytes);
        self.operator.record(rows, rows, started, moved);
    }

    /// One batch that passed on the host, without a copy: on the CPU backend, or kept on
    /// (or replayed onto) the host after a device failure. `on_cpu` counts it in
    /// `cpu_fallback_batches` (a batch that ran on the CPU where a GPU was wanted).
    pub(super) fn host_batch(&self, rows: usize, started: Instant, on_cpu: bool) {
        if on_cpu {
            self.operator.cpu_fallback_batches.add(1);
        }
        self.operator.record(rows, rows, started, 0);
    }
}
