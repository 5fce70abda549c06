//! Device allocations of device batches, reused across batches (an RMM-like pool).
//!
//! Every device batch is one allocation: a transition's upload, and each resident
//! operator's output. Allocating it per batch costs a `cuMemAlloc` and a `cuMemFree` per
//! batch and operator, each a synchronising driver call on a real GPU. A [`DevicePool`]
//! (one per backend) takes back the allocation of a device batch that is dropped and
//! hands it to the next batch of the same [size class](super::size_class) — the layouts
//! of device batches are rounded to size classes, so batches of one shape reuse one
//! allocation. It keeps at most its byte limit parked, freeing the least recently parked
//! first, and counts its parked bytes in the telemetry hub's device tier.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use oxidelake_core::{MemoryTier, TelemetryHub};

use crate::DeviceBuffer;

/// What a [`DevicePool`] has done so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DevicePoolStats {
    /// Allocations made because no parked one fitted.
    pub allocated: usize,
    /// Batches given a parked allocation.
    pub reused: usize,
    /// Bytes parked now.
    pub parked_bytes: usize,
}

/// See the module docs.
pub struct DevicePool {
    parked: Mutex<VecDeque<DeviceBuffer>>,
    max_bytes: usize,
    parked_bytes: AtomicUsize,
    allocated: AtomicUsize,
    reused: AtomicUsize,
}

impl DevicePool {
    /// A pool parking at most `max_bytes` (0: none; every batch allocates).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            parked: Mutex::new(VecDeque::new()),
            max_bytes,
            parked_bytes: AtomicUsize::new(0),
            allocated: AtomicUsize::new(0),
            reused: AtomicUsize::new(0),
        }
    }

    /// A parked allocation of exactly `bytes`, the most recently parked first.
    pub(crate) fn take(&self, bytes: usize) -> Option<DeviceBuffer> {
        let mut parked = self.parked.lock().ok()?;
        let at = parked.iter().rposition(|b| b.len() == bytes)?;
        let buffer = parked.remove(at)?;
        drop(parked);
        self.unpark(buffer.len());
        self.reused.fetch_add(1, Ordering::Relaxed);
        Some(buffer)
    }

    /// Counts an allocation made for want of a parked one.
    pub(crate) fn note_allocated(&self) {
        self.allocated.fetch_add(1, Ordering::Relaxed);
    }

    /// Parks `buffer` for a later [`Self::take`], freeing the least recently parked
    /// allocations past the byte limit (`buffer` itself, if it alone is larger).
    pub(crate) fn give(&self, buffer: DeviceBuffer) {
        let bytes = buffer.len();
        if bytes > self.max_bytes {
            return;
        }
        let Ok(mut parked) = self.parked.lock() else {
            return;
        };
        let mut held = self.parked_bytes.load(Ordering::Relaxed);
        let mut freed = Vec::new();
        while held + bytes > self.max_bytes {
            let Some(oldest) = parked.pop_front() else {
                break;
            };
            held -= oldest.len();
            freed.push(oldest);
        }
        parked.push_back(buffer);
        drop(parked);
        for old in &freed {
            self.unpark(old.len());
        }
        self.parked_bytes.fetch_add(bytes, Ordering::Relaxed);
        TelemetryHub::global().add_tier_bytes(MemoryTier::Device, gauge(bytes));
        // `freed` is dropped here, outside the lock: each drop is a driver call.
    }

    /// What the pool has done so far.
    pub fn stats(&self) -> DevicePoolStats {
        DevicePoolStats {
            allocated: self.allocated.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            parked_bytes: self.parked_bytes.load(Ordering::Relaxed),
        }
    }

    fn unpark(&self, bytes: usize) {
        self.parked_bytes.fetch_sub(bytes, Ordering::Relaxed);
        TelemetryHub::global().add_tier_bytes(MemoryTier::Device, -gauge(bytes));
    }
}

/// `bytes` as a gauge delta.
fn gauge(bytes: usize) -> i64 {
    i64::try_from(bytes).unwrap_or(i64::MAX)
}

impl Drop for DevicePool {
    fn drop(&mut self) {
        let held = self.parked_bytes.swap(0, Ordering::Relaxed);
        TelemetryHub::global().add_tier_bytes(MemoryTier::Device, -gauge(held));
    }
}

impl fmt::Debug for DevicePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DevicePool")
            .field("max_bytes", &self.max_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}
