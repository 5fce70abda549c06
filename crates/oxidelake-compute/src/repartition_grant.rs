//! `RepartitionGrantPool`: a memory pool wrapper that never makes DataFusion's
//! `RepartitionExec` spill, working around a deadlock in DataFusion 55.2.
//!
//! When a `RepartitionExec` output channel cannot reserve memory for a batch, DataFusion
//! 55.2 writes the batch to a spill pool shared by all the operator's input tasks and
//! sends the reader a marker. With two input tasks spilling at once the pool holds two
//! open files; the reader waits on the older one while the batch it needs sits in the
//! newer one, every channel fills, the writers wait too, and the query stops for good:
//! every thread parked, no error (apache/datafusion#24883, fixed after 55.2 by
//! apache/datafusion#24891). It needs nothing more than a memory limit and two
//! partitions: a grouped `count(DISTINCT …)` under a 2 MiB limit hangs within a few runs,
//! and so did one of our spilling-join tests under a 256 KiB pool.
//!
//! This pool lets a `RepartitionExec` channel's reservation (`RepartitionExec[<n>]`) grow
//! without checking or counting it against the limit, so the channel keeps the batch in
//! memory and never takes the spill path. These bytes are batches in flight between two
//! operators, which the consumer drains, not operator state: DataFusion before 51 did not
//! spill them either. They are left out of the pool's total rather than counted, because
//! counting them without ever refusing them starves the operators that must fit beside
//! them: under a 2 MiB limit the final aggregates of the query above then failed with
//! `ResourcesExhausted` in four runs of five. Every other reservation is checked and
//! counted as before. Remove this wrapper
//! when the chain moves to a DataFusion with the fix.

use std::fmt;
use std::sync::Arc;

use datafusion::error::Result;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// Delegates to `inner`, except that a `RepartitionExec` channel's reservation grows and
/// shrinks outside it (never refused, never counted); see the module documentation.
#[derive(Debug)]
pub struct RepartitionGrantPool {
    inner: Arc<dyn MemoryPool>,
    name: String,
}

impl RepartitionGrantPool {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn MemoryPool>) -> Self {
        Self {
            name: format!("repartition_grant({})", inner.name()),
            inner,
        }
    }

    /// The pool it wraps.
    pub fn inner(&self) -> &Arc<dyn MemoryPool> {
        &self.inner
    }
}

/// Whether `consumer` is a `RepartitionExec` output channel's buffer: DataFusion names it
/// `RepartitionExec[<output partition>]` (its merge buffers, `RepartitionExec[Merge <n>]`,
/// do not spill through the shared pool and stay limited).
pub fn is_repartition_channel(consumer: &str) -> bool {
    consumer
        .strip_prefix("RepartitionExec[")
        .and_then(|rest| rest.strip_suffix(']'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

impl fmt::Display for RepartitionGrantPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl MemoryPool for RepartitionGrantPool {
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
        if !is_repartition_channel(reservation.consumer().name()) {
            self.inner.grow(reservation, additional);
        }
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        if !is_repartition_channel(reservation.consumer().name()) {
            self.inner.shrink(reservation, shrink);
        }
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        if is_repartition_channel(reservation.consumer().name()) {
            return Ok(());
        }
        self.inner.try_grow(reservation, additional)
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
    fn only_repartition_channel_buffers_are_named_as_such() {
        assert!(is_repartition_channel("RepartitionExec[0]"));
        assert!(is_repartition_channel("RepartitionExec[17]"));
        assert!(!is_repartition_channel("RepartitionExec[Merge 0]"));
        assert!(!is_repartition_channel("RepartitionExec[]"));
        assert!(!is_repartition_channel("ExternalSorter[0]"));
        assert!(!is_repartition_channel(
            "GraceHashJoinExec[0] build (level 0)"
        ));
    }

    #[test]
    fn repartition_channels_grow_outside_the_limit_and_everyone_else_inside_it() {
        let pool: Arc<dyn MemoryPool> = Arc::new(RepartitionGrantPool::new(Arc::new(
            GreedyMemoryPool::new(1000),
        )));
        let channel = MemoryConsumer::new("RepartitionExec[1]").register(&pool);
        channel.try_grow(1500).unwrap();
        channel.grow(100);
        assert_eq!(channel.size(), 1600);
        assert_eq!(pool.reserved(), 0, "a channel's bytes are not in the pool");
        let sorter = MemoryConsumer::new("ExternalSorter[0]").register(&pool);
        sorter.try_grow(900).unwrap();
        assert!(sorter.try_grow(200).is_err(), "the limit holds for others");
        channel.shrink(600);
        drop(channel);
        assert_eq!(pool.reserved(), 900, "nor does freeing them touch the pool");
        let merge = MemoryConsumer::new("RepartitionExec[Merge 0]").register(&pool);
        assert!(merge.try_grow(200).is_err(), "merge buffers stay limited");
    }
}
