//! Handing a step's reserved bytes to the stock join that builds from them.
//!
//! A grace step reserves its build side while collecting it; the join it then runs (the
//! stock join, or the GPU join for device pairs) reserves the same rows again when it is
//! first polled. Freeing the step's bytes before that would let another partition take
//! them in between, and the join, which cannot spill, would fail with
//! `ResourcesExhausted` on rows the step had room for. So the join runs with a
//! [`HandoverPool`]: its build reservation (`HashJoinInput`, `GpuHashJoinExec…`) is
//! served first from the step's bytes, moved over inside the pool, and only what it asks
//! beyond them is checked against the session's pool.

use std::fmt;
use std::sync::{Arc, Mutex};

use datafusion::error::Result;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{
    MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

use crate::device_budget::DeviceClaim;

/// The session's pool, with the bytes of `held` handed to the stock join's build
/// reservation as it grows; see the module documentation.
pub(super) struct HandoverPool {
    inner: Arc<dyn MemoryPool>,
    held: Mutex<MemoryReservation>,
    /// The build side's device claim, returned with the join (when the pool goes).
    _device: Option<DeviceClaim>,
    name: String,
}

impl HandoverPool {
    /// A task context like `context` whose pool hands `held`'s bytes to the join's build
    /// reservation, and holds `device` until the join is dropped.
    pub(super) fn context(
        context: &TaskContext,
        held: MemoryReservation,
        device: Option<DeviceClaim>,
    ) -> Arc<TaskContext> {
        let runtime = context.runtime_env();
        let inner = Arc::clone(&runtime.memory_pool);
        let pool = Self {
            name: format!("grace_handover({})", inner.name()),
            inner,
            held: Mutex::new(held),
            _device: device,
        };
        let mut runtime = datafusion::execution::runtime_env::RuntimeEnv::clone(&runtime);
        runtime.memory_pool = Arc::new(pool);
        Arc::new(TaskContext::new(
            context.task_id(),
            context.session_id(),
            context.session_config().clone(),
            context.scalar_functions().clone(),
            context.higher_order_functions().clone(),
            context.aggregate_functions().clone(),
            context.window_functions().clone(),
            Arc::new(runtime),
        ))
    }

    /// The build reservation of the stock join or of the GPU join.
    fn is_join_build(reservation: &MemoryReservation) -> bool {
        let name = reservation.consumer().name();
        name.starts_with("HashJoinInput") || name.starts_with("GpuHashJoinExec")
    }
}

impl fmt::Debug for HandoverPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoverPool")
            .field("inner", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl fmt::Display for HandoverPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl MemoryPool for HandoverPool {
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
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.inner.shrink(reservation, shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        if !Self::is_join_build(reservation) {
            return self.inner.try_grow(reservation, additional);
        }
        // A poisoned lock only means another grow panicked; the count in it is intact.
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        let moved = additional.min(held.size());
        // Never both in the pool at once, never both out: the shrink and the grow
        // are one move, so the pool's total stays the same.
        held.shrink(moved);
        self.inner.grow(reservation, moved);
        if additional > moved
            && let Err(e) = self.inner.try_grow(reservation, additional - moved)
        {
            // Undo the move: the reservation only records `additional` on success.
            self.inner.shrink(reservation, moved);
            held.grow(moved);
            return Err(e);
        }
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
    use datafusion::execution::runtime_env::RuntimeEnvBuilder;

    fn context(limit: usize) -> Arc<TaskContext> {
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::new(GreedyMemoryPool::new(limit)))
            .build()
            .unwrap();
        Arc::new(TaskContext::default().with_runtime(Arc::new(runtime)))
    }

    #[test]
    fn the_join_build_takes_the_held_bytes_before_anyone_else_can() {
        let session = context(1000);
        let held = MemoryConsumer::new("grace").register(session.memory_pool());
        held.try_grow(800).unwrap();
        let handed = HandoverPool::context(&session, held, None);
        // Another partition finds no room for the held bytes.
        let other = MemoryConsumer::new("other").register(session.memory_pool());
        assert!(other.try_grow(300).is_err());
        // The stock join gets them, and 150 more from the pool.
        let build = MemoryConsumer::new("HashJoinInput").register(handed.memory_pool());
        build.try_grow(950).unwrap();
        assert_eq!(session.memory_pool().reserved(), 950);
        // Beyond the pool it fails, and the held bytes it had taken are held again.
        let second = MemoryConsumer::new("HashJoinInput[1]").register(handed.memory_pool());
        assert!(second.try_grow(100).is_err());
        assert_eq!(session.memory_pool().reserved(), 950);
        drop(build);
        assert_eq!(session.memory_pool().reserved(), 0);
    }

    #[test]
    fn other_consumers_of_the_join_are_checked_against_the_session_pool() {
        let session = context(1000);
        let held = MemoryConsumer::new("grace").register(session.memory_pool());
        held.try_grow(800).unwrap();
        let handed = HandoverPool::context(&session, held, None);
        let output = MemoryConsumer::new("HashJoinOutput").register(handed.memory_pool());
        assert!(output.try_grow(300).is_err());
        output.try_grow(200).unwrap();
        assert_eq!(session.memory_pool().reserved(), 1000);
    }
}
