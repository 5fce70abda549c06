//! Spill figures from a running plan's metrics into the telemetry hub.

use std::sync::Arc;

use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::{MemoryTier, TelemetryHub};

/// Spill files, spilled bytes and bytes held in host memory instead of spilled, over
/// every operator of `plan`, so far.
fn plan_spills(plan: &Arc<dyn ExecutionPlan>) -> (u64, u64, u64) {
    let own = plan.metrics().map_or((0, 0, 0), |m| {
        (
            m.spill_count().unwrap_or(0) as u64,
            m.spilled_bytes().unwrap_or(0) as u64,
            m.sum_by_name("held_in_host_bytes")
                .map_or(0, |v| v.as_usize() as u64),
        )
    });
    plan.children()
        .into_iter()
        .map(plan_spills)
        .fold(own, |(f, b, h), (cf, cb, ch)| (f + cf, b + cb, h + ch))
}

/// What of one query's spills the hub has been told, so each observation adds only what
/// is new. One account per executing plan.
#[derive(Debug, Default)]
pub(crate) struct SpillAccount {
    files: u64,
    bytes: u64,
    held_in_host_bytes: u64,
    /// The disk manager's usage last added to the hub's disk gauge.
    disk_bytes: u64,
}

impl SpillAccount {
    /// Adds the spills `plan` made since the last call to `hub`'s counters.
    pub(crate) fn observe(&mut self, plan: &Arc<dyn ExecutionPlan>, hub: &TelemetryHub) {
        let (files, bytes, held) = plan_spills(plan);
        self.held_in_host_bytes = self.held_in_host_bytes.max(held);
        if files > self.files || bytes > self.bytes {
            hub.record_spill_files(
                files.saturating_sub(self.files),
                bytes.saturating_sub(self.bytes),
            );
            (self.files, self.bytes) = (files.max(self.files), bytes.max(self.bytes));
        }
    }

    /// Moves the hub's disk gauge by the change in the disk manager's usage since the
    /// last call (the spill files alive now). Only the dashboard calls this: it is the
    /// one observer of a process's disk manager at a time.
    pub(crate) fn observe_disk(&mut self, used_bytes: u64, hub: &TelemetryHub) {
        let delta = i128::from(used_bytes) - i128::from(self.disk_bytes);
        if delta != 0 {
            hub.add_tier_bytes(
                MemoryTier::Disk,
                i64::try_from(delta).unwrap_or(if delta > 0 { i64::MAX } else { i64::MIN }),
            );
            self.disk_bytes = used_bytes;
        }
    }

    /// Spill files seen so far.
    pub(crate) fn files(&self) -> u64 {
        self.files
    }

    /// Spilled bytes seen so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Bytes held in host memory instead of spilled, seen so far.
    pub(crate) fn held_in_host_bytes(&self) -> u64 {
        self.held_in_host_bytes
    }
}
