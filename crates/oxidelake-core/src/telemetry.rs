//! The telemetry hub: lock-free counters written by the engine, read as snapshots.
//!
//! Writers (operators, the spill manager, device copies) only ever add to atomics, so
//! recording costs a handful of uncontended atomic adds per batch, never a lock.
//!
//! Readers want a *consistent* picture, e.g. an operator's `rows_out` from the same
//! instant as its `batches`. Independent atomics cannot give that by themselves, so every
//! write is bracketed by a shared write gate: `begun` is incremented before the write and
//! `finished` after it. A reader loads `finished`, reads every counter, then loads `begun`;
//! if the two are equal, no write was in flight when the read started and none began
//! before it ended, so the values form one consistent cut. Otherwise it retries a bounded
//! number of times and, if writers never pause, returns the last read with
//! [`TelemetrySnapshot::consistent`] set to `false` rather than blocking the writers.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Duration;

use crate::{BackendKind, MemoryTier};

/// How many times a snapshot re-reads before giving up on a consistent cut.
const SNAPSHOT_MAX_ATTEMPTS: usize = 64;

/// Operator registrations kept; the oldest are dropped beyond this, so a long-running
/// process that executes many plans does not grow the hub without bound.
pub const MAX_OPERATORS: usize = 1024;

#[derive(Debug, Default)]
struct WriteGate {
    begun: AtomicU64,
    finished: AtomicU64,
}

impl WriteGate {
    fn write(&self, f: impl FnOnce()) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        f();
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

/// Counters of one operator instance, handed out by [`TelemetryHub::register_operator`].
#[derive(Debug)]
pub struct OperatorTelemetry {
    id: u64,
    name: String,
    placement: BackendKind,
    gate: Arc<WriteGate>,
    rows_in: AtomicU64,
    rows_out: AtomicU64,
    batches: AtomicU64,
    busy_ns: AtomicU64,
    bytes_moved: AtomicU64,
    allocated_bytes: AtomicU64,
}

impl OperatorTelemetry {
    /// Records one processed batch: rows consumed and produced, the time spent on it,
    /// and the bytes copied between host and device for it.
    pub fn record_batch(&self, rows_in: u64, rows_out: u64, latency: Duration, bytes_moved: u64) {
        let busy_ns = u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX);
        self.gate.write(|| {
            self.rows_in.fetch_add(rows_in, Ordering::Relaxed);
            self.rows_out.fetch_add(rows_out, Ordering::Relaxed);
            self.batches.fetch_add(1, Ordering::Relaxed);
            self.busy_ns.fetch_add(busy_ns, Ordering::Relaxed);
            self.bytes_moved.fetch_add(bytes_moved, Ordering::Relaxed);
        });
    }

    /// Sets the memory the operator currently holds (hash tables, staging buffers).
    pub fn set_allocated_bytes(&self, bytes: u64) {
        self.gate
            .write(|| self.allocated_bytes.store(bytes, Ordering::Relaxed));
    }

    fn snapshot(&self) -> OperatorSnapshot {
        OperatorSnapshot {
            id: self.id,
            name: self.name.clone(),
            placement: self.placement,
            rows_in: self.rows_in.load(Ordering::Relaxed),
            rows_out: self.rows_out.load(Ordering::Relaxed),
            batches: self.batches.load(Ordering::Relaxed),
            busy_ns: self.busy_ns.load(Ordering::Relaxed),
            bytes_moved: self.bytes_moved.load(Ordering::Relaxed),
            allocated_bytes: self.allocated_bytes.load(Ordering::Relaxed),
        }
    }
}

/// An operator's counters at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorSnapshot {
    /// Registration order within the hub, starting at 0.
    pub id: u64,
    /// Display name, e.g. `GpuFilterExec`.
    pub name: String,
    /// The backend the operator was placed on.
    pub placement: BackendKind,
    /// Rows consumed.
    pub rows_in: u64,
    /// Rows produced.
    pub rows_out: u64,
    /// Batches processed.
    pub batches: u64,
    /// Total time spent processing batches, in nanoseconds.
    pub busy_ns: u64,
    /// Bytes copied between host and device.
    pub bytes_moved: u64,
    /// Memory currently held by the operator.
    pub allocated_bytes: u64,
}

impl OperatorSnapshot {
    /// Mean latency per batch in milliseconds (0 before the first batch).
    pub fn mean_batch_latency_ms(&self) -> f64 {
        if self.batches == 0 {
            0.0
        } else {
            self.busy_ns as f64 / self.batches as f64 / 1e6
        }
    }
}

/// Bytes resident in each memory tier at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryGauges {
    /// Bytes in device memory.
    pub device_bytes: u64,
    /// Bytes in host memory managed by the engine.
    pub host_bytes: u64,
    /// Of the host bytes, how many are page-locked (pinned).
    pub pinned_bytes: u64,
    /// Bytes in spill files.
    pub disk_bytes: u64,
    /// The most host bytes held at once since the hub was created: a query that
    /// finished has released its memory, and this is what it took.
    pub host_peak_bytes: u64,
}

/// Cumulative bytes moved between host, device and disk.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransferSnapshot {
    /// Host to device copies.
    pub h2d_bytes: u64,
    /// Device to host copies.
    pub d2h_bytes: u64,
    /// Time spent in host/device copies, in nanoseconds.
    pub transfer_ns: u64,
}

/// Cumulative spill activity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillSnapshot {
    /// Batches moved to a colder tier.
    pub demotions: u64,
    /// Batches moved back to a hotter tier.
    pub promotions: u64,
    /// Bytes written to spill files.
    pub written_bytes: u64,
    /// Bytes read back from spill files.
    pub read_bytes: u64,
    /// Time spent writing spill files, in nanoseconds.
    pub write_ns: u64,
    /// Time spent reading spill files, in nanoseconds.
    pub read_ns: u64,
}

impl SpillSnapshot {
    /// Spill write throughput in bytes per second (0 before the first spill).
    pub fn write_bytes_per_sec(&self) -> f64 {
        if self.write_ns == 0 {
            0.0
        } else {
            self.written_bytes as f64 * 1e9 / self.write_ns as f64
        }
    }
}

/// Everything the hub knows, at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetrySnapshot {
    /// Per-operator counters, in registration order.
    pub operators: Vec<OperatorSnapshot>,
    /// Bytes per memory tier.
    pub memory: MemoryGauges,
    /// Host/device transfer totals.
    pub transfers: TransferSnapshot,
    /// Spill totals.
    pub spill: SpillSnapshot,
    /// A one-line summary of the plan being executed (empty when idle).
    pub plan_summary: String,
    /// Whether the values form one consistent cut (see the module docs).
    pub consistent: bool,
}

/// The engine's telemetry: written by operators and memory managers, read by the TUI.
#[derive(Debug, Default)]
pub struct TelemetryHub {
    gate: Arc<WriteGate>,
    operators: RwLock<Vec<Arc<OperatorTelemetry>>>,
    next_operator_id: AtomicU64,
    device_bytes: AtomicI64,
    host_bytes: AtomicI64,
    host_peak_bytes: AtomicI64,
    pinned_bytes: AtomicI64,
    disk_bytes: AtomicI64,
    h2d_bytes: AtomicU64,
    d2h_bytes: AtomicU64,
    transfer_ns: AtomicU64,
    demotions: AtomicU64,
    promotions: AtomicU64,
    spill_written_bytes: AtomicU64,
    spill_read_bytes: AtomicU64,
    spill_write_ns: AtomicU64,
    spill_read_ns: AtomicU64,
    device_query_reruns: AtomicU64,
    plan_summary: RwLock<String>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn gauge(v: &AtomicI64) -> u64 {
    u64::try_from(v.load(Ordering::Relaxed).max(0)).unwrap_or(0)
}

impl TelemetryHub {
    /// An empty hub. Tests create their own; the engine shares [`TelemetryHub::global`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The process-wide hub the engine and the TUI share.
    pub fn global() -> Arc<TelemetryHub> {
        static GLOBAL: OnceLock<Arc<TelemetryHub>> = OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(TelemetryHub::new())).clone()
    }

    /// Registers an operator instance and returns the handle it records through.
    pub fn register_operator(
        &self,
        name: impl Into<String>,
        placement: BackendKind,
    ) -> Arc<OperatorTelemetry> {
        let handle = Arc::new(OperatorTelemetry {
            id: self.next_operator_id.fetch_add(1, Ordering::Relaxed),
            name: name.into(),
            placement,
            gate: Arc::clone(&self.gate),
            rows_in: AtomicU64::new(0),
            rows_out: AtomicU64::new(0),
            batches: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            bytes_moved: AtomicU64::new(0),
            allocated_bytes: AtomicU64::new(0),
        });
        let mut operators = self
            .operators
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if operators.len() >= MAX_OPERATORS {
            let excess = operators.len() + 1 - MAX_OPERATORS;
            operators.drain(..excess);
        }
        operators.push(Arc::clone(&handle));
        handle
    }

    /// Adds `delta_bytes` (negative to release) to the gauge of `tier`.
    pub fn add_tier_bytes(&self, tier: MemoryTier, delta_bytes: i64) {
        let gauge = match tier {
            MemoryTier::Device => &self.device_bytes,
            MemoryTier::Host => &self.host_bytes,
            MemoryTier::Disk => &self.disk_bytes,
        };
        self.gate.write(|| {
            let now = gauge.fetch_add(delta_bytes, Ordering::Relaxed) + delta_bytes;
            if tier == MemoryTier::Host {
                self.host_peak_bytes.fetch_max(now, Ordering::Relaxed);
            }
        });
    }

    /// Adds `delta_bytes` (negative to release) to the pinned-host gauge.
    pub fn add_pinned_bytes(&self, delta_bytes: i64) {
        self.gate
            .write(|| _ = self.pinned_bytes.fetch_add(delta_bytes, Ordering::Relaxed));
    }

    /// Records a host-to-device copy.
    pub fn record_h2d(&self, bytes: u64, elapsed: Duration) {
        self.gate.write(|| {
            self.h2d_bytes.fetch_add(bytes, Ordering::Relaxed);
            self.transfer_ns
                .fetch_add(nanos(elapsed), Ordering::Relaxed);
        });
    }

    /// Records a device-to-host copy.
    pub fn record_d2h(&self, bytes: u64, elapsed: Duration) {
        self.gate.write(|| {
            self.d2h_bytes.fetch_add(bytes, Ordering::Relaxed);
            self.transfer_ns
                .fetch_add(nanos(elapsed), Ordering::Relaxed);
        });
    }

    /// Records one batch moving from tier `from` to the colder tier `to`; when `to` is
    /// disk, `written_bytes` went into a spill file in `elapsed`.
    pub fn record_demotion(
        &self,
        from: MemoryTier,
        to: MemoryTier,
        bytes: u64,
        written_bytes: u64,
        elapsed: Duration,
    ) {
        let (from_g, to_g) = (self.tier_gauge(from), self.tier_gauge(to));
        let moved = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.gate.write(|| {
            from_g.fetch_sub(moved, Ordering::Relaxed);
            to_g.fetch_add(moved, Ordering::Relaxed);
            self.demotions.fetch_add(1, Ordering::Relaxed);
            self.spill_written_bytes
                .fetch_add(written_bytes, Ordering::Relaxed);
            if written_bytes > 0 {
                self.spill_write_ns
                    .fetch_add(nanos(elapsed), Ordering::Relaxed);
            }
        });
    }

    /// Records one batch moving from tier `from` back to the hotter tier `to`; when
    /// `from` is disk, `read_bytes` were read from a spill file in `elapsed`.
    pub fn record_promotion(
        &self,
        from: MemoryTier,
        to: MemoryTier,
        bytes: u64,
        read_bytes: u64,
        elapsed: Duration,
    ) {
        let (from_g, to_g) = (self.tier_gauge(from), self.tier_gauge(to));
        let moved = i64::try_from(bytes).unwrap_or(i64::MAX);
        self.gate.write(|| {
            from_g.fetch_sub(moved, Ordering::Relaxed);
            let now = to_g.fetch_add(moved, Ordering::Relaxed) + moved;
            if to == MemoryTier::Host {
                self.host_peak_bytes.fetch_max(now, Ordering::Relaxed);
            }
            self.promotions.fetch_add(1, Ordering::Relaxed);
            self.spill_read_bytes
                .fetch_add(read_bytes, Ordering::Relaxed);
            if read_bytes > 0 {
                self.spill_read_ns
                    .fetch_add(nanos(elapsed), Ordering::Relaxed);
            }
        });
    }

    /// Records spill files written by operators that account their memory in the
    /// query's memory pool (DataFusion's sorts and aggregates): `files` demotions from
    /// host to disk totalling `written_bytes`. The tier gauges are not touched: the pool
    /// already released the host bytes, and the disk gauge follows the disk manager.
    pub fn record_spill_files(&self, files: u64, written_bytes: u64) {
        self.gate.write(|| {
            self.demotions.fetch_add(files, Ordering::Relaxed);
            self.spill_written_bytes
                .fetch_add(written_bytes, Ordering::Relaxed);
        });
    }

    /// Records one query that failed on its device before its first row and was run
    /// again on the CPU placement (`oxidelake-runtime`'s `device_rerun`).
    pub fn record_device_query_rerun(&self) {
        self.device_query_reruns.fetch_add(1, Ordering::Relaxed);
    }

    /// Queries re-run on the CPU after a device failure, since the hub was created. A
    /// count of whole queries, not part of [`TelemetrySnapshot`]'s consistent cut.
    pub fn device_query_reruns(&self) -> u64 {
        self.device_query_reruns.load(Ordering::Relaxed)
    }

    /// Replaces the one-line plan summary shown by the dashboard.
    pub fn set_plan_summary(&self, summary: impl Into<String>) {
        let mut slot = self
            .plan_summary
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = summary.into();
    }

    fn tier_gauge(&self, tier: MemoryTier) -> &AtomicI64 {
        match tier {
            MemoryTier::Device => &self.device_bytes,
            MemoryTier::Host => &self.host_bytes,
            MemoryTier::Disk => &self.disk_bytes,
        }
    }

    /// A snapshot of every counter; see the module docs for what "consistent" means.
    pub fn snapshot(&self) -> TelemetrySnapshot {
        let operators: Vec<Arc<OperatorTelemetry>> = self
            .operators
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let plan_summary = self
            .plan_summary
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let finished = self.gate.finished.load(Ordering::SeqCst);
            let snap = TelemetrySnapshot {
                operators: operators.iter().map(|op| op.snapshot()).collect(),
                memory: MemoryGauges {
                    device_bytes: gauge(&self.device_bytes),
                    host_bytes: gauge(&self.host_bytes),
                    pinned_bytes: gauge(&self.pinned_bytes),
                    disk_bytes: gauge(&self.disk_bytes),
                    host_peak_bytes: gauge(&self.host_peak_bytes),
                },
                transfers: TransferSnapshot {
                    h2d_bytes: self.h2d_bytes.load(Ordering::Relaxed),
                    d2h_bytes: self.d2h_bytes.load(Ordering::Relaxed),
                    transfer_ns: self.transfer_ns.load(Ordering::Relaxed),
                },
                spill: SpillSnapshot {
                    demotions: self.demotions.load(Ordering::Relaxed),
                    promotions: self.promotions.load(Ordering::Relaxed),
                    written_bytes: self.spill_written_bytes.load(Ordering::Relaxed),
                    read_bytes: self.spill_read_bytes.load(Ordering::Relaxed),
                    write_ns: self.spill_write_ns.load(Ordering::Relaxed),
                    read_ns: self.spill_read_ns.load(Ordering::Relaxed),
                },
                plan_summary: plan_summary.clone(),
                consistent: false,
            };
            let begun = self.gate.begun.load(Ordering::SeqCst);
            if begun == finished || attempt >= SNAPSHOT_MAX_ATTEMPTS {
                return TelemetrySnapshot {
                    consistent: begun == finished,
                    ..snap
                };
            }
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    #[test]
    fn operator_counters_accumulate_and_appear_in_registration_order() {
        let hub = TelemetryHub::new();
        let filter = hub.register_operator("GpuFilterExec", BackendKind::CpuSimd);
        let join = hub.register_operator("GpuHashJoinExec", BackendKind::Cuda);
        filter.record_batch(100, 40, Duration::from_millis(2), 0);
        filter.record_batch(100, 60, Duration::from_millis(4), 0);
        join.record_batch(10, 5, Duration::from_millis(1), 800);

        let snap = hub.snapshot();
        assert!(snap.consistent);
        assert_eq!(snap.operators.len(), 2);
        let f = &snap.operators[0];
        assert_eq!(
            (f.name.as_str(), f.rows_in, f.rows_out, f.batches),
            ("GpuFilterExec", 200, 100, 2)
        );
        assert!((f.mean_batch_latency_ms() - 3.0).abs() < 1e-9);
        assert_eq!(snap.operators[1].placement, BackendKind::Cuda);
        assert_eq!(snap.operators[1].bytes_moved, 800);
    }

    #[test]
    fn demotion_moves_bytes_between_tier_gauges_and_counts_spill_io() {
        let hub = TelemetryHub::new();
        hub.add_tier_bytes(MemoryTier::Host, 4096);
        hub.record_demotion(
            MemoryTier::Host,
            MemoryTier::Disk,
            1024,
            1100,
            Duration::from_millis(1),
        );
        hub.record_promotion(
            MemoryTier::Disk,
            MemoryTier::Host,
            1024,
            1100,
            Duration::from_millis(1),
        );
        hub.record_demotion(
            MemoryTier::Host,
            MemoryTier::Disk,
            1024,
            1100,
            Duration::from_millis(1),
        );
        let snap = hub.snapshot();
        assert_eq!(snap.memory.host_bytes, 3072);
        assert_eq!(snap.memory.disk_bytes, 1024);
        assert_eq!((snap.spill.demotions, snap.spill.promotions), (2, 1));
        assert_eq!(snap.spill.written_bytes, 2200);
        assert!(snap.spill.write_bytes_per_sec() > 0.0);
    }

    #[test]
    fn spill_files_count_as_demotions_without_moving_tier_gauges() {
        let hub = TelemetryHub::new();
        hub.add_tier_bytes(MemoryTier::Host, 4096);
        hub.record_spill_files(3, 9000);
        let snap = hub.snapshot();
        assert_eq!((snap.spill.demotions, snap.spill.written_bytes), (3, 9000));
        assert_eq!((snap.memory.host_bytes, snap.memory.disk_bytes), (4096, 0));
    }

    #[test]
    fn the_host_peak_outlives_the_release() {
        let hub = TelemetryHub::new();
        hub.add_tier_bytes(MemoryTier::Host, 4096);
        hub.add_tier_bytes(MemoryTier::Host, -4000);
        hub.add_tier_bytes(MemoryTier::Host, 1000);
        let memory = hub.snapshot().memory;
        assert_eq!((memory.host_bytes, memory.host_peak_bytes), (1096, 4096));
    }

    #[test]
    fn snapshots_taken_during_concurrent_writes_never_show_a_torn_batch() {
        // Every batch adds 3 rows in and 1 row out, so in any consistent cut
        // rows_in == 3 * rows_out == 3 * batches.
        let hub = Arc::new(TelemetryHub::new());
        let op = hub.register_operator("op", BackendKind::CpuSimd);
        let writers: Vec<_> = (0..2)
            .map(|_| {
                let op = Arc::clone(&op);
                thread::spawn(move || {
                    for _ in 0..20_000 {
                        op.record_batch(3, 1, Duration::from_nanos(1), 0);
                    }
                })
            })
            .collect();
        let mut consistent_seen = 0;
        for _ in 0..2_000 {
            let snap = hub.snapshot();
            if snap.consistent {
                consistent_seen += 1;
                let o = &snap.operators[0];
                assert_eq!(o.rows_in, 3 * o.rows_out);
                assert_eq!(o.rows_out, o.batches);
            }
        }
        for w in writers {
            w.join().unwrap();
        }
        let last = hub.snapshot();
        assert!(
            last.consistent,
            "quiescent hub must give a consistent snapshot"
        );
        assert_eq!(last.operators[0].batches, 40_000);
        assert_eq!(last.operators[0].rows_in, 120_000);
        // Whether any snapshot landed between writes depends on scheduling; the
        // invariant above is checked on every one that did.
        let _ = consistent_seen;
    }

    #[test]
    fn the_hub_keeps_only_the_most_recent_operator_registrations() {
        let hub = TelemetryHub::new();
        for i in 0..(MAX_OPERATORS + 10) {
            hub.register_operator(format!("op{i}"), BackendKind::CpuSimd);
        }
        let snap = hub.snapshot();
        assert_eq!(snap.operators.len(), MAX_OPERATORS);
        assert_eq!(snap.operators[0].name, "op10");
        assert_eq!(snap.operators[0].id, 10);
    }

    #[test]
    fn device_query_reruns_are_counted_one_per_rerun() {
        let hub = TelemetryHub::new();
        assert_eq!(hub.device_query_reruns(), 0);
        hub.record_device_query_rerun();
        hub.record_device_query_rerun();
        assert_eq!(hub.device_query_reruns(), 2);
    }

    #[test]
    fn plan_summary_is_replaced_not_appended() {
        let hub = TelemetryHub::new();
        hub.set_plan_summary("a");
        hub.set_plan_summary("b");
        assert_eq!(hub.snapshot().plan_summary, "b");
    }
}
