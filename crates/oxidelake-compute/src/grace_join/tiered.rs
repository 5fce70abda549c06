//! The parts of a join split for the device budget, held in host memory through
//! [`oxidelake_memory::SpillManager`] while the memory pool has room and demoted to Arrow
//! IPC files beyond it (issue #15, item 3).
//!
//! A build side past the device limit (`oxidelake.memory.device_limit`) usually fits in
//! host memory many times over. Writing every row of both sides to disk, as a split for
//! the memory pool must, would turn a device-sized problem into disk traffic. Here each
//! part's rows are registered in the host tier of a `SpillManager`:
//!
//! - the manager's host budget is half of what the memory pool has free when the split
//!   starts (the other half is left for the pair joins that follow; an unlimited pool
//!   gives an unlimited budget, as DataFusion's operators assume);
//! - each batch is reserved in the pool before it is kept, so the pool's limit holds even
//!   when other operators took memory since; a batch the pool refuses goes straight to
//!   disk;
//! - past the budget, the manager demotes the least recently registered batches to
//!   Arrow IPC files in a directory beside the disk manager's files, within what the
//!   disk manager's limit leaves;
//! - joining a pair takes its batches out of the manager one at a time, reading a
//!   demoted one back and deleting its file.
//!
//! The host tier's bytes are in the session pool, so the telemetry hub's host gauge shows
//! them while they are held; what went to disk counts in the operator's spill metrics
//! like any spill file (not in the disk gauge of `oxide tui`, which reads the disk
//! manager's own files).

use std::sync::Arc;

use arrow::array::UInt32Array;
use arrow::compute::take_record_batch;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{Count, SpillMetrics};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use oxidelake_core::{MemoryTier, TelemetryHub};
use oxidelake_memory::{BatchId, DiskWrites, MemoryError, SpillConfig, SpillManager};

use super::FAN_OUT;
use super::partitioned::{PartRouter, compact_views};
use super::side::Side;

/// Both sides of one split, part by part, in a [`SpillManager`]'s host and disk tiers.
pub(super) struct TieredParts {
    manager: SpillManager,
    /// The host tier's bytes in the session's memory pool.
    reservation: MemoryReservation,
    left_schema: SchemaRef,
    right_schema: SchemaRef,
    left: Vec<Vec<BatchId>>,
    right: Vec<Vec<BatchId>>,
    /// Bytes registered in the host tier (the operator's `held_in_host_bytes`).
    held: Count,
    spill_metrics: SpillMetrics,
    /// Where demoted batches go; removed with what is left in it when the parts drop.
    _dir: tempfile::TempDir,
}

/// Routes rows to parts and registers them with a [`TieredParts`].
pub(super) struct TieredWriter {
    parts: TieredParts,
    left_router: PartRouter,
    right_router: PartRouter,
}

impl TieredWriter {
    /// The parts of a split at hash seed `seed`, their host tier reserved in the pool as
    /// `consumer`; the NULL-key rows its routers drop count in `null_keys_dropped`.
    pub(super) fn new(
        context: &Arc<TaskContext>,
        join: &HashJoinExec,
        seed: u64,
        consumer: String,
        held: Count,
        spill_metrics: &SpillMetrics,
        null_keys_dropped: &Count,
    ) -> Result<Self> {
        let (left_schema, left_router) = PartRouter::new(Side::Left, seed, join, null_keys_dropped);
        let (right_schema, right_router) =
            PartRouter::new(Side::Right, seed, join, null_keys_dropped);
        let pool = context.memory_pool();
        let host_budget = match pool.memory_limit() {
            MemoryLimit::Finite(limit) => (limit.saturating_sub(pool.reserved()) / 2) as u64,
            MemoryLimit::Infinite | MemoryLimit::Unknown => u64::MAX,
        };
        let disk = &context.runtime_env().disk_manager;
        let disk_budget = if disk.tmp_files_enabled() {
            disk.max_temp_directory_size()
                .saturating_sub(disk.used_disk_space())
        } else {
            0
        };
        let base = disk
            .temp_dir_paths()
            .into_iter()
            .next()
            .unwrap_or_else(std::env::temp_dir);
        let dir = tempfile::Builder::new()
            .prefix("oxidelake-grace-parts-")
            .tempdir_in(&base)
            .map_err(DataFusionError::IoError)?;
        let config = SpillConfig::new(0, host_budget, disk_budget);
        // A hub of its own: the host tier's bytes reach the process's hub through the
        // pool reservation below (every session pool is a `TelemetryPool`), and the files
        // through the spill metrics the runtime forwards; reporting them here as well
        // would count them twice.
        let manager = SpillManager::local(config, dir.path(), Arc::new(TelemetryHub::new()))
            .map_err(memory_error)?;
        let reservation = MemoryConsumer::new(consumer)
            .with_can_spill(true)
            .register(pool);
        Ok(Self {
            parts: TieredParts {
                manager,
                reservation,
                left_schema,
                right_schema,
                left: vec![Vec::new(); FAN_OUT],
                right: vec![Vec::new(); FAN_OUT],
                held,
                spill_metrics: spill_metrics.clone(),
                _dir: dir,
            },
            left_router,
            right_router,
        })
    }

    /// Registers each row of `batch` (of `side`) with the part its keys hash to.
    pub(super) async fn add(&mut self, side: Side, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let router = match side {
            Side::Left => &mut self.left_router,
            Side::Right => &mut self.right_router,
        };
        let (order, starts) = router.route(batch)?;
        for p in 0..FAN_OUT {
            let rows = &order[starts[p]..starts[p + 1]];
            if rows.is_empty() {
                continue;
            }
            // A `take` per part, not slices of one sorted batch: each part owns its
            // buffers, so the bytes the manager counts are the bytes it holds.
            let part = compact_views(&take_record_batch(
                batch,
                &UInt32Array::from(rows.to_vec()),
            )?)?;
            let id = self.parts.register(part).await?;
            match side {
                Side::Left => self.parts.left[p].push(id),
                Side::Right => self.parts.right[p].push(id),
            }
        }
        Ok(())
    }

    /// The parts, ready to be read pair by pair.
    pub(super) fn finish(self) -> Arc<TieredParts> {
        Arc::new(self.parts)
    }
}

impl TieredParts {
    async fn register(&self, part: RecordBatch) -> Result<BatchId> {
        let bytes = part.get_array_memory_size();
        let tier = if self.reservation.try_grow(bytes).is_ok() {
            MemoryTier::Host
        } else {
            MemoryTier::Disk
        };
        let before = self.manager.disk_writes();
        let id = self
            .manager
            .register(part, tier)
            .await
            .map_err(memory_error)?;
        if tier == MemoryTier::Host && self.manager.tier_of(id).await == Some(MemoryTier::Host) {
            self.held.add(bytes);
        }
        self.count_disk_writes(before, self.manager.disk_writes());
        self.sync_reservation().await;
        Ok(id)
    }

    /// Adds the files written between two readings of the manager's counters (the batch
    /// just registered, if it went straight to disk, and the batches its registration
    /// demoted) to the operator's spill metrics.
    fn count_disk_writes(&self, before: DiskWrites, after: DiskWrites) {
        let add = |count: &Count, from: u64, to: u64| {
            count.add(usize::try_from(to.saturating_sub(from)).unwrap_or(usize::MAX));
        };
        add(
            &self.spill_metrics.spill_file_count,
            before.files,
            after.files,
        );
        add(&self.spill_metrics.spilled_bytes, before.bytes, after.bytes);
        add(&self.spill_metrics.spilled_rows, before.rows, after.rows);
    }

    /// Sets the reservation to the bytes the host tier holds now (demotions and takes
    /// free what they moved).
    async fn sync_reservation(&self) {
        let held = self.manager.used_bytes(MemoryTier::Host).await;
        self.reservation
            .resize(usize::try_from(held).unwrap_or(usize::MAX));
    }

    /// Whether part `p` has rows on either side.
    pub(super) fn has_rows(&self, p: usize) -> bool {
        !self.left[p].is_empty() || !self.right[p].is_empty()
    }

    /// Part `p` of `side` as a stream, each batch taken out of the manager as it is read.
    pub(super) fn stream(self: &Arc<Self>, side: Side, p: usize) -> SendableRecordBatchStream {
        let (schema, ids) = match side {
            Side::Left => (Arc::clone(&self.left_schema), self.left[p].clone()),
            Side::Right => (Arc::clone(&self.right_schema), self.right[p].clone()),
        };
        let parts = Arc::clone(self);
        let stream = futures::stream::iter(ids).then(move |id| {
            let parts = Arc::clone(&parts);
            async move {
                let batch = parts.manager.take(id).await.map_err(memory_error)?;
                parts.sync_reservation().await;
                Ok(batch)
            }
        });
        Box::pin(RecordBatchStreamAdapter::new(schema, stream.boxed()))
    }
}

/// A memory-tier error as DataFusion's: a full disk tier is `ResourcesExhausted`.
fn memory_error(e: MemoryError) -> DataFusionError {
    match e {
        MemoryError::OverBudget { .. } => DataFusionError::ResourcesExhausted(format!(
            "GraceHashJoinExec: the parts of a join split for the device limit need more \
             room than the memory pool and the disk manager leave: {e}"
        )),
        other => DataFusionError::External(Box::new(other)),
    }
}
