//! Staging buffers reused across the batches of one transition.
//!
//! Every upload packs its batch into a host staging buffer and every download reads one
//! back. Allocating it per batch costs a `cuMemHostAlloc` (pinned memory: a page-locking
//! system call, milliseconds on a real driver) per batch and direction. A [`StagingPool`]
//! parks the buffers a transition is done with and hands them to its next batches.
//!
//! Copies move whole buffers (a download's lengths are equal; an upload fills the start
//! of an allocation that may be longer, for the images a narrow column widens into), so
//! a pooled batch's allocation is rounded up to a [size class](size_class): eight classes
//! per doubling, so the rounding adds less than an eighth (or 4 KiB), and the
//! device-sized batches a transition gathers, whose sizes differ only by their strings,
//! land in one class and reuse one buffer.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use oxidelake_core::EngineError;

use crate::{GpuBackend, HostBuffer};

/// The smallest class step: 4 KiB.
const MIN_STEP: usize = 4096;

/// `bytes` rounded up to its size class: a multiple of an eighth of the power of two at
/// or below it (at least 4 KiB), so eight classes per doubling.
pub fn size_class(bytes: usize) -> usize {
    let n = bytes.max(1);
    let floor = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let step = (floor / 8).max(MIN_STEP);
    n.div_ceil(step) * step
}

/// See the module docs.
#[derive(Debug)]
pub struct StagingPool {
    parked: Mutex<Vec<HostBuffer>>,
    max_parked: usize,
    allocated: AtomicUsize,
    reused: AtomicUsize,
}

impl StagingPool {
    /// A pool keeping at most `max_parked` idle buffers (the least recently parked are
    /// freed first).
    pub fn new(max_parked: usize) -> Self {
        Self {
            parked: Mutex::new(Vec::new()),
            max_parked,
            allocated: AtomicUsize::new(0),
            reused: AtomicUsize::new(0),
        }
    }

    /// A staging buffer of exactly `bytes` (a size class): a parked one of that length,
    /// or a new one from `backend`.
    pub fn take(&self, backend: &dyn GpuBackend, bytes: usize) -> Result<HostBuffer, EngineError> {
        let parked = {
            let mut parked = self.lock()?;
            parked
                .iter()
                .rposition(|b| b.len() == bytes)
                .map(|i| parked.remove(i))
        };
        match parked {
            Some(buffer) => {
                self.reused.fetch_add(1, Ordering::Relaxed);
                Ok(buffer)
            }
            None => {
                let buffer = backend.alloc_pinned_host(bytes)?;
                self.allocated.fetch_add(1, Ordering::Relaxed);
                Ok(buffer)
            }
        }
    }

    /// Parks `buffer` for a later [`Self::take`].
    pub fn give(&self, buffer: HostBuffer) {
        if self.max_parked == 0 {
            return;
        }
        // A poisoned lock only loses the buffer (it is freed).
        if let Ok(mut parked) = self.parked.lock() {
            if parked.len() >= self.max_parked {
                parked.remove(0);
            }
            parked.push(buffer);
        }
    }

    /// Buffers allocated so far.
    pub fn allocated(&self) -> usize {
        self.allocated.load(Ordering::Relaxed)
    }

    /// Takes answered by a parked buffer so far.
    pub fn reused(&self) -> usize {
        self.reused.load(Ordering::Relaxed)
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Vec<HostBuffer>>, EngineError> {
        self.parked
            .lock()
            .map_err(|_| EngineError::Internal("staging pool lock poisoned".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuBackend;
    use crate::DeviceMemory;

    #[test]
    fn size_classes_round_up_by_at_most_an_eighth_and_start_at_4_kib() {
        assert_eq!(size_class(0), 4096);
        assert_eq!(size_class(1), 4096);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 8192);
        for bytes in [70_000usize, 1 << 20, (1 << 20) + 1, 33_554_433, 123_456_789] {
            let class = size_class(bytes);
            assert!(class >= bytes, "{bytes} → {class}");
            assert!(class - bytes <= bytes / 8 + MIN_STEP, "{bytes} → {class}");
            assert_eq!(size_class(class), class, "a class is its own class");
        }
        // Device batches differing only in their strings share a class.
        assert_eq!(size_class(30_000_000), size_class(30_400_000));
    }

    #[test]
    fn a_parked_buffer_of_the_same_class_is_reused_and_others_are_allocated() {
        let cpu = CpuBackend::new();
        let pool = StagingPool::new(2);
        let a = pool.take(&cpu, 8192).unwrap();
        pool.give(a);
        let b = pool.take(&cpu, 8192).unwrap();
        assert_eq!((pool.allocated(), pool.reused()), (1, 1));
        let c = pool.take(&cpu, 16_384).unwrap();
        assert_eq!(c.len(), 16_384);
        assert_eq!((pool.allocated(), pool.reused()), (2, 1));
        pool.give(b);
        pool.give(c);
        // Room for two: a third parked buffer frees the oldest (the 8 KiB one).
        pool.give(cpu.alloc_pinned_host(4096).unwrap());
        let again = pool.take(&cpu, 8192).unwrap();
        assert_eq!(again.len(), 8192);
        assert_eq!((pool.allocated(), pool.reused()), (3, 1));
    }
}
