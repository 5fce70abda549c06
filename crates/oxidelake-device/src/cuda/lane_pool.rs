//! Pipeline lanes kept for the next batch: pinned staging, device buffers and the second
//! lane's stream are allocated once per shape and reused, instead of once per batch.
//!
//! A lane (see `pipeline.rs`) is the set of buffers one stream of the double-buffered
//! pipeline works in. Allocating it costs a `cuMemHostAlloc` per staging buffer (page
//! locking is slow: it maps and pins every page) and a `cuMemAlloc` per device buffer, so
//! per-batch allocation made the pipeline's fixed cost larger than the work it overlapped.
//! Like RMM's pool (libcudf, Sirius) and spark-rapids' pinned pool, lanes are parked here
//! when a call finishes and taken by the next call with the same [`LaneKey`] (operator,
//! sizes and, for the filter, the program), which is every later batch of an operator
//! once its input is coalesced to the device batch size.
//!
//! Lanes are allocated on the pool's own stream, not on the stream of the call that
//! first needed them: a device buffer keeps its allocating stream alive, and a parked
//! lane must not keep an operator's stream (and, on the emulated driver, its worker
//! thread) alive after the operator is gone.
//!
//! Ordering: a parked lane carries an event recorded after the last work that touched
//! its buffers; whoever takes it makes its stream wait for that event before using them,
//! since buffers reached through raw pointer tables are invisible to cudarc's own
//! per-slice event tracking.
//!
//! The pool is bounded in bytes and in lanes; when a lane needs room, the least recently
//! parked lanes are freed first, so lanes of filters that no longer run give way to the
//! ones running now.
//!
//! What a lane holds is counted in the telemetry hub from creation to drop (pinned bytes,
//! device tier), so `oxide tui`'s pinned and VRAM gauges show the pool.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use cudarc::driver::{CudaEvent, CudaStream};
use oxidelake_core::{MemoryTier, TelemetryHub};

/// Bytes a lane holds on each side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LaneBytes {
    pub(crate) pinned: usize,
    pub(crate) device: usize,
}

impl std::ops::Add for LaneBytes {
    type Output = LaneBytes;
    fn add(self, other: LaneBytes) -> LaneBytes {
        LaneBytes {
            pinned: self.pinned + other.pinned,
            device: self.device + other.device,
        }
    }
}

impl std::iter::Sum for LaneBytes {
    fn sum<I: Iterator<Item = LaneBytes>>(iter: I) -> LaneBytes {
        iter.fold(LaneBytes::default(), |a, b| a + b)
    }
}

/// A lane's buffers, as the pool needs to see them.
pub(crate) trait LaneState: Send + 'static {
    /// What the lane holds (for the limit and the telemetry gauges).
    fn bytes(&self) -> LaneBytes;
}

/// Which parked lanes a call may take: equal keys mean equal buffer shapes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LaneKey {
    operator: &'static str,
    shape: Vec<u64>,
}

impl LaneKey {
    /// A key of `operator`'s lanes with these sizes (and any other value, such as a
    /// program's hash, that makes a lane's contents specific to a call).
    pub(crate) fn new(operator: &'static str, shape: Vec<u64>) -> Self {
        Self { operator, shape }
    }
}

/// Counters of the pool (cumulative since the backend was created).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LanePoolStats {
    /// Lanes allocated because none with the key was parked.
    pub lanes_created: u64,
    /// Lanes taken from the pool.
    pub lanes_reused: u64,
    /// Lanes freed to respect the pool's limits (the least recently parked first).
    pub lanes_released: u64,
    /// Streams created for the pipeline's second lane.
    pub streams_created: u64,
    /// Second-lane streams taken from the pool.
    pub streams_reused: u64,
    /// Pinned plus device bytes of the lanes parked now.
    pub parked_bytes: u64,
}

/// A lane's state with its bytes counted in the telemetry hub until it is dropped.
pub(crate) struct Tracked<L: LaneState> {
    pub(crate) state: L,
    bytes: LaneBytes,
}

impl<L: LaneState> Tracked<L> {
    pub(crate) fn new(state: L) -> Self {
        let bytes = state.bytes();
        let hub = TelemetryHub::global();
        hub.add_pinned_bytes(bytes.pinned as i64);
        hub.add_tier_bytes(MemoryTier::Device, bytes.device as i64);
        Self { state, bytes }
    }
}

impl<L: LaneState> Drop for Tracked<L> {
    fn drop(&mut self) {
        let hub = TelemetryHub::global();
        hub.add_pinned_bytes(-(self.bytes.pinned as i64));
        hub.add_tier_bytes(MemoryTier::Device, -(self.bytes.device as i64));
    }
}

/// A lane waiting for its next call.
struct Parked {
    lane: Box<dyn Any + Send>,
    bytes: usize,
    /// Recorded after the last work on the lane's buffers.
    ready: Arc<CudaEvent>,
    /// When it was parked (a counter): the oldest lane goes first when room is needed.
    parked_at: u64,
}

#[derive(Default)]
struct Inner {
    lanes: HashMap<LaneKey, Vec<Parked>>,
    parked_lanes: usize,
    /// Parks so far (the next `parked_at`).
    parks: u64,
    streams: Vec<Arc<CudaStream>>,
    /// Where lanes are allocated (created on first use).
    home: Option<Arc<CudaStream>>,
    stats: LanePoolStats,
}

impl Inner {
    /// Takes the most recently parked lane with `key`.
    fn remove(&mut self, key: &LaneKey) -> Option<Parked> {
        let last = self.lanes.get(key)?.len().checked_sub(1)?;
        self.remove_at(key, last)
    }

    /// Takes the least recently parked lane of any key.
    fn remove_oldest(&mut self) -> Option<Parked> {
        let (key, index) = self
            .lanes
            .iter()
            .flat_map(|(key, list)| list.iter().enumerate().map(move |(i, p)| (key, i, p)))
            .min_by_key(|(_, _, p)| p.parked_at)
            .map(|(key, i, _)| (key.clone(), i))?;
        self.remove_at(&key, index)
    }

    /// Takes lane `index` of `key`, keeping the counts right and the map free of empty
    /// entries.
    fn remove_at(&mut self, key: &LaneKey, index: usize) -> Option<Parked> {
        let list = self.lanes.get_mut(key)?;
        let parked = (index < list.len()).then(|| list.remove(index))?;
        if list.is_empty() {
            self.lanes.remove(key);
        }
        self.stats.parked_bytes -= parked.bytes as u64;
        self.parked_lanes -= 1;
        Some(parked)
    }
}

/// The backend's pool of pipeline lanes and second-lane streams.
pub(crate) struct LanePool {
    inner: Mutex<Inner>,
    /// Most bytes parked lanes may hold together.
    limit_bytes: usize,
}

/// Most second-lane streams kept: one per pipeline running at the same time (a few
/// partitions per device).
const MAX_PARKED_STREAMS: usize = 4;
/// Most lanes kept, whatever their size: many distinct filters (each key holds its
/// program) must not fill the pool with lanes nobody takes again.
const MAX_PARKED_LANES: usize = 64;

impl LanePool {
    pub(crate) fn new(limit_bytes: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            limit_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A parked lane with `key` and the event its user must wait for, if any.
    pub(crate) fn take<L: LaneState>(&self, key: &LaneKey) -> Option<(Tracked<L>, Arc<CudaEvent>)> {
        let mut inner = self.lock();
        let parked = inner.remove(key)?;
        match parked.lane.downcast::<Tracked<L>>() {
            Ok(lane) => {
                inner.stats.lanes_reused += 1;
                Some((*lane, parked.ready))
            }
            // A key names one lane type; another type under it is dropped, not used.
            Err(_) => None,
        }
    }

    /// Counts a lane allocated because [`LanePool::take`] found none.
    pub(crate) fn note_created(&self) {
        self.lock().stats.lanes_created += 1;
    }

    /// Parks `lane` under `key`, ready once `ready` completes. The least recently parked
    /// lanes are freed to make room; a lane larger than the whole limit is freed itself.
    pub(crate) fn park<L: LaneState>(&self, key: LaneKey, lane: Tracked<L>, ready: Arc<CudaEvent>) {
        let bytes = lane.bytes.pinned + lane.bytes.device;
        if bytes > self.limit_bytes {
            self.lock().stats.lanes_released += 1;
            return;
        }
        let mut evicted = Vec::new();
        let mut inner = self.lock();
        while inner.parked_lanes >= MAX_PARKED_LANES
            || inner.stats.parked_bytes as usize + bytes > self.limit_bytes
        {
            match inner.remove_oldest() {
                Some(old) => {
                    inner.stats.lanes_released += 1;
                    evicted.push(old);
                }
                None => break,
            }
        }
        inner.stats.parked_bytes += bytes as u64;
        inner.parked_lanes += 1;
        inner.parks += 1;
        let parked_at = inner.parks;
        inner.lanes.entry(key).or_default().push(Parked {
            lane: Box::new(lane),
            bytes,
            ready,
            parked_at,
        });
        // Freed outside the lock: dropping device buffers calls the driver.
        drop(inner);
        drop(evicted);
    }

    /// The stream lanes are allocated on (created on first use, in `like`'s context).
    pub(crate) fn home_stream(
        &self,
        like: &Arc<CudaStream>,
    ) -> Result<Arc<CudaStream>, cudarc::driver::DriverError> {
        let mut inner = self.lock();
        if let Some(home) = &inner.home {
            return Ok(Arc::clone(home));
        }
        let home = like.context().new_stream()?;
        inner.home = Some(Arc::clone(&home));
        Ok(home)
    }

    /// A stream for the second lane, made to wait for the work queued on `after` so far.
    pub(crate) fn stream_after(
        &self,
        after: &Arc<CudaStream>,
    ) -> Result<Arc<CudaStream>, cudarc::driver::DriverError> {
        let parked = {
            let mut inner = self.lock();
            let s = inner.streams.pop();
            if s.is_some() {
                inner.stats.streams_reused += 1;
            } else {
                inner.stats.streams_created += 1;
            }
            s
        };
        match parked {
            Some(stream) => {
                stream.join(after)?;
                Ok(stream)
            }
            None => after.fork(),
        }
    }

    /// Returns a second-lane stream (its work is joined into the caller's stream).
    pub(crate) fn park_stream(&self, stream: Arc<CudaStream>) {
        let mut inner = self.lock();
        if inner.streams.len() < MAX_PARKED_STREAMS {
            inner.streams.push(stream);
        }
    }

    pub(crate) fn stats(&self) -> LanePoolStats {
        self.lock().stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lane_bytes_add_up_per_side() {
        let total: LaneBytes = [
            LaneBytes {
                pinned: 3,
                device: 5,
            },
            LaneBytes {
                pinned: 7,
                device: 11,
            },
        ]
        .into_iter()
        .sum();
        assert_eq!(
            total,
            LaneBytes {
                pinned: 10,
                device: 16
            }
        );
    }

    #[test]
    fn keys_differ_by_operator_and_by_shape() {
        let a = LaneKey::new("filter", vec![1024, 2]);
        assert_eq!(a, LaneKey::new("filter", vec![1024, 2]));
        assert_ne!(a, LaneKey::new("filter", vec![2048, 2]));
        assert_ne!(a, LaneKey::new("distance", vec![1024, 2]));
    }
}
