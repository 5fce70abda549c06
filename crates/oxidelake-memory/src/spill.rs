//! `SpillManager`: three memory tiers with watermark demotion and promotion on access.
//!
//! Every registered batch lives in exactly one tier. When a tier's usage passes its high
//! watermark, the least recently touched batches in it are demoted one tier colder until
//! usage falls to the low watermark (the gap between the two stops a tier from thrashing
//! on every registration). Reading a batch touches it; reading a batch from disk promotes
//! it back to the host tier, which may in turn demote colder batches. Queries read their
//! spilled batches once, with [`SpillManager::take`], which does not promote; `get`'s
//! promotion runs in this crate's tests only.
//!
//! The device tier holds batches whose owner keeps a device-resident copy; without a GPU
//! its budget is simply unused. The disk tier is Arrow IPC files written through an
//! [`ObjectStore`] (the same trait DataFusion reads through), so an io_uring store or an
//! in-memory store can stand in for the local file system.
//!
//! Demotion happens inside the `register`/`get` future that crossed the watermark: the
//! caller's task does the I/O, so spilling applies back-pressure to the producer that
//! caused it. A tokio mutex serialises tier changes; it is held across spill I/O, which
//! keeps the accounting exact at the cost of one spill at a time per manager.

mod ipc_file;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use arrow::buffer::Buffer;
use arrow::record_batch::RecordBatch;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use oxidelake_core::{MemoryTier, TelemetryHub};

use crate::MemoryError;
use ipc_file::SpillFileInfo;

/// Budgets and watermarks of a [`SpillManager`].
#[derive(Debug, Clone)]
pub struct SpillConfig {
    /// Bytes the device tier may hold (0 without a GPU).
    pub device_budget_bytes: u64,
    /// Bytes the host tier may hold.
    pub host_budget_bytes: u64,
    /// Bytes the spill directory may hold.
    pub disk_budget_bytes: u64,
    /// Fraction of a budget above which demotion starts, in (0, 1].
    pub high_watermark: f64,
    /// Fraction of a budget demotion brings usage down to, in [0, high_watermark].
    pub low_watermark: f64,
    /// Object-store prefix under which spill files are written.
    pub spill_prefix: Path,
}

impl SpillConfig {
    /// Budgets with the default watermarks (demote above 90 %, down to 70 %).
    pub fn new(device_budget_bytes: u64, host_budget_bytes: u64, disk_budget_bytes: u64) -> Self {
        Self {
            device_budget_bytes,
            host_budget_bytes,
            disk_budget_bytes,
            high_watermark: 0.9,
            low_watermark: 0.7,
            spill_prefix: Path::from("spill"),
        }
    }

    fn validate(&self) -> Result<(), MemoryError> {
        let hw = self.high_watermark;
        let lw = self.low_watermark;
        if !(hw > 0.0 && hw <= 1.0 && (0.0..=hw).contains(&lw)) {
            return Err(MemoryError::Config(format!(
                "watermarks must satisfy 0 <= low <= high <= 1 and high > 0, got low {lw}, high {hw}"
            )));
        }
        Ok(())
    }

    fn budget(&self, tier: MemoryTier) -> u64 {
        match tier {
            MemoryTier::Device => self.device_budget_bytes,
            MemoryTier::Host => self.host_budget_bytes,
            MemoryTier::Disk => self.disk_budget_bytes,
        }
    }
}

/// Handle of a batch registered with a [`SpillManager`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BatchId(u64);

impl fmt::Display for BatchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "batch#{}", self.0)
    }
}

enum Data {
    Memory(RecordBatch),
    Disk { path: Path, info: SpillFileInfo },
}

struct Entry {
    tier: MemoryTier,
    bytes: u64,
    last_touch: u64,
    data: Data,
}

#[derive(Default)]
struct State {
    entries: HashMap<u64, Entry>,
    next_id: u64,
    clock: u64,
    used: [u64; 3],
}

fn slot(tier: MemoryTier) -> usize {
    match tier {
        MemoryTier::Device => 0,
        MemoryTier::Host => 1,
        MemoryTier::Disk => 2,
    }
}

impl State {
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The least recently touched batch in `tier`, other than `protect`.
    fn coldest(&self, tier: MemoryTier, protect: Option<u64>) -> Option<u64> {
        self.entries
            .iter()
            .filter(|(id, e)| e.tier == tier && Some(**id) != protect)
            .min_by_key(|(id, e)| (e.last_touch, **id))
            .map(|(id, _)| *id)
    }
}

/// Keeps batches in device, host or disk tiers within budgets; see the module docs.
pub struct SpillManager {
    config: SpillConfig,
    store: Arc<dyn ObjectStore>,
    telemetry: Arc<TelemetryHub>,
    instance: u64,
    state: tokio::sync::Mutex<State>,
    /// Spill files written (registrations straight to disk and demotions to it).
    disk_writes: AtomicU64,
    /// Bytes of those files.
    disk_write_bytes: AtomicU64,
    /// Rows of those files.
    disk_write_rows: AtomicU64,
}

/// What a [`SpillManager`] has written to its disk tier so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskWrites {
    /// Spill files written.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Their rows.
    pub rows: u64,
}

impl fmt::Debug for SpillManager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpillManager")
            .field("config", &self.config)
            .field("instance", &self.instance)
            .finish_non_exhaustive()
    }
}

/// A manager dropped with batches still registered (a query cancelled between writing
/// and reading its parts) takes their bytes out of the hub's tier gauges; its spill files
/// stay where its store put them, for the owner of the directory to remove.
impl Drop for SpillManager {
    fn drop(&mut self) {
        let state = self.state.get_mut();
        for tier in [MemoryTier::Device, MemoryTier::Host, MemoryTier::Disk] {
            let held = state.used[slot(tier)];
            if held > 0 {
                self.telemetry
                    .add_tier_bytes(tier, -i64::try_from(held).unwrap_or(i64::MAX));
            }
        }
    }
}

impl SpillManager {
    /// A manager writing spill files to `store` and reporting to `telemetry`.
    pub fn new(
        config: SpillConfig,
        store: Arc<dyn ObjectStore>,
        telemetry: Arc<TelemetryHub>,
    ) -> Result<Self, MemoryError> {
        static INSTANCES: AtomicU64 = AtomicU64::new(0);
        config.validate()?;
        Ok(Self {
            config,
            store,
            telemetry,
            instance: INSTANCES.fetch_add(1, Ordering::Relaxed),
            state: tokio::sync::Mutex::new(State::default()),
            disk_writes: AtomicU64::new(0),
            disk_write_bytes: AtomicU64::new(0),
            disk_write_rows: AtomicU64::new(0),
        })
    }

    /// A manager spilling into the local directory `dir` (which must exist).
    pub fn local(
        config: SpillConfig,
        dir: &std::path::Path,
        telemetry: Arc<TelemetryHub>,
    ) -> Result<Self, MemoryError> {
        let store = object_store::local::LocalFileSystem::new_with_prefix(dir).map_err(|e| {
            MemoryError::SpillIo {
                path: dir.display().to_string(),
                source: e,
            }
        })?;
        Self::new(config, Arc::new(store), telemetry)
    }

    /// The configuration this manager was built with.
    pub fn config(&self) -> &SpillConfig {
        &self.config
    }

    /// Registers `batch` in `tier` (device or host; disk writes it straight to a spill
    /// file) and demotes cold batches if a watermark is crossed. A batch larger than a
    /// tier's whole budget goes to the next colder tier.
    pub async fn register(
        &self,
        batch: RecordBatch,
        tier: MemoryTier,
    ) -> Result<BatchId, MemoryError> {
        let bytes = batch.get_array_memory_size() as u64;
        let mut state = self.state.lock().await;
        let id = state.next_id;
        state.next_id += 1;
        let mut tier = tier;
        while tier != MemoryTier::Disk && bytes > self.config.budget(tier) {
            tier = tier.colder().unwrap_or(MemoryTier::Disk);
        }
        let touch = state.tick();
        let data = if tier == MemoryTier::Disk {
            let path = self.spill_path(id);
            let info = self.write_spill(&mut state, &batch, &path).await?;
            Data::Disk { path, info }
        } else {
            Data::Memory(batch)
        };
        state.entries.insert(
            id,
            Entry {
                tier,
                bytes,
                last_touch: touch,
                data,
            },
        );
        state.used[slot(tier)] += bytes;
        self.telemetry.add_tier_bytes(tier, bytes as i64);
        tracing::debug!(id, %tier, bytes, "registered batch");
        self.rebalance(&mut state, Some(id)).await?;
        Ok(BatchId(id))
    }

    /// Returns the batch, marking it recently used. A batch on disk is read back,
    /// verified, and promoted to the host tier.
    pub async fn get(&self, id: BatchId) -> Result<RecordBatch, MemoryError> {
        let mut state = self.state.lock().await;
        let touch = state.tick();
        let entry = state
            .entries
            .get_mut(&id.0)
            .ok_or(MemoryError::UnknownBatch(id.0))?;
        entry.last_touch = touch;
        let (path, info, bytes) = match &entry.data {
            Data::Memory(batch) => return Ok(batch.clone()),
            Data::Disk { path, info } => (path.clone(), info.clone(), entry.bytes),
        };
        let started = Instant::now();
        let raw = self.read_object(&path).await?;
        let batch = ipc_file::decode(Buffer::from(raw), &info, path.as_ref())?;
        if bytes > self.config.host_budget_bytes {
            // Too large for the host tier: serve it from disk without promoting.
            return Ok(batch);
        }
        self.delete_object(&path).await;
        if let Some(entry) = state.entries.get_mut(&id.0) {
            entry.tier = MemoryTier::Host;
            entry.data = Data::Memory(batch.clone());
        }
        state.used[slot(MemoryTier::Disk)] -= bytes;
        state.used[slot(MemoryTier::Host)] += bytes;
        self.telemetry.record_promotion(
            MemoryTier::Disk,
            MemoryTier::Host,
            bytes,
            info.file_bytes,
            started.elapsed(),
        );
        tracing::debug!(id = id.0, bytes, "promoted batch disk -> host");
        self.rebalance(&mut state, Some(id.0)).await?;
        Ok(batch)
    }

    /// Returns the batch and forgets it, as [`SpillManager::get`] then
    /// [`SpillManager::release`] would, but a batch on disk is read back without being
    /// promoted: a caller that reads each batch once (a spilled partition joined and
    /// dropped) would otherwise demote a colder batch to make room for one it is about
    /// to drop.
    pub async fn take(&self, id: BatchId) -> Result<RecordBatch, MemoryError> {
        let entry = self.forget(&mut *self.state.lock().await, id)?;
        match entry.data {
            Data::Memory(batch) => Ok(batch),
            Data::Disk { path, info } => {
                let started = Instant::now();
                let read = match self.read_object(&path).await {
                    Ok(raw) => ipc_file::decode(Buffer::from(raw), &info, path.as_ref()),
                    Err(e) => Err(e),
                };
                // The entry is gone either way, so is its file.
                self.delete_object(&path).await;
                let batch = read?;
                self.telemetry.record_promotion(
                    MemoryTier::Disk,
                    MemoryTier::Host,
                    entry.bytes,
                    info.file_bytes,
                    started.elapsed(),
                );
                Ok(batch)
            }
        }
    }

    /// The spill files this manager has written so far (the disk tier's traffic,
    /// whether the batches are still there or not).
    pub fn disk_writes(&self) -> DiskWrites {
        DiskWrites {
            files: self.disk_writes.load(Ordering::Relaxed),
            bytes: self.disk_write_bytes.load(Ordering::Relaxed),
            rows: self.disk_write_rows.load(Ordering::Relaxed),
        }
    }

    /// Forgets the batch and deletes its spill file, if any.
    pub async fn release(&self, id: BatchId) -> Result<(), MemoryError> {
        let entry = self.forget(&mut *self.state.lock().await, id)?;
        if let Data::Disk { path, .. } = entry.data {
            self.delete_object(&path).await;
        }
        Ok(())
    }

    /// Removes the entry of `id` and takes its bytes out of its tier and the hub's gauge.
    fn forget(&self, state: &mut State, id: BatchId) -> Result<Entry, MemoryError> {
        let entry = state
            .entries
            .remove(&id.0)
            .ok_or(MemoryError::UnknownBatch(id.0))?;
        state.used[slot(entry.tier)] -= entry.bytes;
        self.telemetry
            .add_tier_bytes(entry.tier, -(entry.bytes as i64));
        Ok(entry)
    }

    /// The tier a batch currently lives in, or `None` if the id is unknown.
    pub async fn tier_of(&self, id: BatchId) -> Option<MemoryTier> {
        self.state.lock().await.entries.get(&id.0).map(|e| e.tier)
    }

    /// Bytes currently held in `tier` by this manager.
    pub async fn used_bytes(&self, tier: MemoryTier) -> u64 {
        self.state.lock().await.used[slot(tier)]
    }

    /// The object-store path of the spill file of `id`, while it is on disk.
    pub async fn spill_file(&self, id: BatchId) -> Option<Path> {
        match &self.state.lock().await.entries.get(&id.0)?.data {
            Data::Disk { path, .. } => Some(path.clone()),
            Data::Memory(_) => None,
        }
    }

    fn spill_path(&self, id: u64) -> Path {
        self.config.spill_prefix.clone().join(format!(
            "{}-{}-{id}.arrow",
            std::process::id(),
            self.instance
        ))
    }

    /// Demotes the coldest batches of every tier over its high watermark, hottest tier
    /// first, so that a device demotion that overfills the host tier is handled in the
    /// same pass. `protect` (the batch just touched) is demoted last of all.
    async fn rebalance(&self, state: &mut State, protect: Option<u64>) -> Result<(), MemoryError> {
        for tier in [MemoryTier::Device, MemoryTier::Host] {
            let budget = self.config.budget(tier) as f64;
            if (state.used[slot(tier)] as f64) <= budget * self.config.high_watermark {
                continue;
            }
            let target = budget * self.config.low_watermark;
            while state.used[slot(tier)] as f64 > target {
                let victim = state.coldest(tier, protect).or_else(|| {
                    protect.filter(|p| state.entries.get(p).is_some_and(|e| e.tier == tier))
                });
                let Some(victim) = victim else { break };
                self.demote(state, victim).await?;
            }
        }
        Ok(())
    }

    async fn demote(&self, state: &mut State, id: u64) -> Result<(), MemoryError> {
        let Some(entry) = state.entries.get(&id) else {
            return Err(MemoryError::UnknownBatch(id));
        };
        let (from, bytes) = (entry.tier, entry.bytes);
        let Some(to) = from.colder() else {
            return Ok(());
        };
        let started = Instant::now();
        let (data, written) = match (&entry.data, to) {
            (Data::Memory(batch), MemoryTier::Disk) => {
                let batch = batch.clone();
                let path = self.spill_path(id);
                let info = self.write_spill(state, &batch, &path).await?;
                let written = info.file_bytes;
                (Data::Disk { path, info }, written)
            }
            (Data::Memory(batch), _) => (Data::Memory(batch.clone()), 0),
            (Data::Disk { .. }, _) => return Ok(()),
        };
        if let Some(entry) = state.entries.get_mut(&id) {
            entry.tier = to;
            entry.data = data;
        }
        state.used[slot(from)] -= bytes;
        state.used[slot(to)] += bytes;
        self.telemetry
            .record_demotion(from, to, bytes, written, started.elapsed());
        tracing::debug!(id, %from, %to, bytes, written, "demoted batch");
        Ok(())
    }

    async fn write_spill(
        &self,
        state: &mut State,
        batch: &RecordBatch,
        path: &Path,
    ) -> Result<SpillFileInfo, MemoryError> {
        let (bytes, info) = ipc_file::encode(batch, path.as_ref())?;
        let disk_used: u64 = state
            .entries
            .values()
            .filter_map(|e| match &e.data {
                Data::Disk { info, .. } => Some(info.file_bytes),
                Data::Memory(_) => None,
            })
            .sum();
        if disk_used + info.file_bytes > self.config.disk_budget_bytes {
            return Err(MemoryError::OverBudget {
                tier: MemoryTier::Disk,
                requested_bytes: info.file_bytes,
                budget_bytes: self.config.disk_budget_bytes,
            });
        }
        self.store
            .put(path, PutPayload::from(bytes))
            .await
            .map_err(|source| MemoryError::SpillIo {
                path: path.to_string(),
                source,
            })?;
        self.disk_writes.fetch_add(1, Ordering::Relaxed);
        self.disk_write_bytes
            .fetch_add(info.file_bytes, Ordering::Relaxed);
        self.disk_write_rows
            .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
        Ok(info)
    }

    async fn read_object(&self, path: &Path) -> Result<bytes::Bytes, MemoryError> {
        let io = |source| MemoryError::SpillIo {
            path: path.to_string(),
            source,
        };
        self.store
            .get(path)
            .await
            .map_err(io)?
            .bytes()
            .await
            .map_err(io)
    }

    async fn delete_object(&self, path: &Path) {
        if let Err(e) = self.store.delete(path).await {
            tracing::warn!(%path, error = %e, "could not delete spill file");
        }
    }
}

#[cfg(test)]
mod tests;
