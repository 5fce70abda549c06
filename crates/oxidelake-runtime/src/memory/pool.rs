//! A memory pool wrapper that tells the telemetry hub what the query holds.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::error::Result;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};
use oxidelake_core::{MemoryTier, TelemetryHub};

/// What a session's host pool holds, at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostMemory {
    /// Bytes reserved now.
    pub reserved: usize,
    /// The most ever reserved at once since the pool was installed.
    pub peak: usize,
    /// The pool's limit (`None`: unbounded).
    pub limit: Option<usize>,
}

/// Delegates every call to `inner` and reports each grow and shrink to the hub's host
/// gauge, keeping the peak. Installed around every pool a session uses.
#[derive(Debug)]
pub struct TelemetryPool {
    inner: Arc<dyn MemoryPool>,
    hub: Arc<TelemetryHub>,
    name: String,
    peak: AtomicUsize,
}

impl TelemetryPool {
    /// Wraps `inner`, reporting to `hub`.
    pub fn new(inner: Arc<dyn MemoryPool>, hub: Arc<TelemetryHub>) -> Self {
        Self {
            name: format!("telemetry({})", inner.name()),
            inner,
            hub,
            peak: AtomicUsize::new(0),
        }
    }

    /// Reserved, peak and limit bytes.
    pub fn host_memory(&self) -> HostMemory {
        HostMemory {
            reserved: self.inner.reserved(),
            peak: self.peak.load(Ordering::Relaxed),
            limit: match self.inner.memory_limit() {
                MemoryLimit::Finite(n) => Some(n),
                MemoryLimit::Infinite | MemoryLimit::Unknown => None,
            },
        }
    }

    fn grew(&self, bytes: usize) {
        self.hub
            .add_tier_bytes(MemoryTier::Host, i64::try_from(bytes).unwrap_or(i64::MAX));
        self.peak
            .fetch_max(self.inner.reserved(), Ordering::Relaxed);
    }
}

impl fmt::Display for TelemetryPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl MemoryPool for TelemetryPool {
    fn name(&self) -> &str {
        &self.name
    }

    fn register(&self, consumer: &MemoryConsumer) {
        self.inner.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.inner.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.inner.grow(reservation, additional);
        self.grew(additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
        self.hub
            .add_tier_bytes(MemoryTier::Host, -i64::try_from(shrink).unwrap_or(i64::MAX));
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.inner.try_grow(reservation, additional)?;
        self.grew(additional);
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.inner.reserved()
    }

    fn memory_limit(&self) -> MemoryLimit {
        self.inner.memory_limit()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::execution::memory_pool::GreedyMemoryPool;

    #[test]
    fn the_host_gauge_and_peak_follow_reservations_and_limits_still_hold() {
        let hub = Arc::new(TelemetryHub::new());
        let pool: Arc<dyn MemoryPool> = Arc::new(TelemetryPool::new(
            Arc::new(GreedyMemoryPool::new(1000)),
            Arc::clone(&hub),
        ));
        let a = MemoryConsumer::new("a").register(&pool);
        a.try_grow(600).unwrap();
        let b = MemoryConsumer::new("b").register(&pool);
        b.grow(300);
        assert_eq!(hub.snapshot().memory.host_bytes, 900);
        assert!(b.try_grow(200).is_err(), "the inner limit is enforced");
        a.shrink(500);
        drop(b);
        assert_eq!(hub.snapshot().memory.host_bytes, 100);
        let memory = pool.downcast_ref::<TelemetryPool>().unwrap().host_memory();
        assert_eq!(
            memory,
            HostMemory {
                reserved: 100,
                peak: 900,
                limit: Some(1000)
            }
        );
    }
}
