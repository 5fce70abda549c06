//! What a user asks of host memory: a limit, how operators share it, and a disk limit
//! for their spill files.

use std::str::FromStr;
use std::sync::Arc;

use datafusion::execution::memory_pool::{
    FairSpillPool, GreedyMemoryPool, MemoryPool, TrackConsumersPool, UnboundedMemoryPool,
};
use datafusion::prelude::SessionContext;
use oxidelake_core::EngineError;

/// How many of the largest consumers an out-of-memory error names.
const NAMED_CONSUMERS: usize = 5;

/// How operators share a limited pool (datafusion-cli's `--mem-pool-type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PoolKind {
    /// Every spilling operator gets an equal share of what non-spilling ones leave, so
    /// one partition's sort cannot starve another's: the default, because a query
    /// runs one instance of each operator per partition.
    #[default]
    Fair,
    /// First come, first served (DataFusion's choice for `SET … memory_limit`).
    Greedy,
}

impl FromStr for PoolKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "fair" => Ok(PoolKind::Fair),
            "greedy" => Ok(PoolKind::Greedy),
            other => Err(format!("expected fair or greedy, got {other:?}")),
        }
    }
}

/// The host budget of an embedded session. The default is DataFusion's: no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostBudget {
    /// Bytes the query's operators may hold together; beyond it sorts, aggregates and
    /// joins spill to disk or fail with `ResourcesExhausted`.
    pub memory_limit: Option<usize>,
    /// How the limit is shared.
    pub pool: PoolKind,
    /// Bytes the spill files may take on disk (DataFusion's default when `None`).
    pub disk_limit: Option<u64>,
}

impl HostBudget {
    /// The pool this budget asks for, before [`super::TelemetryPool`] wraps it.
    pub(crate) fn pool(&self) -> Arc<dyn MemoryPool> {
        let Some(limit) = self.memory_limit else {
            return Arc::new(UnboundedMemoryPool::default());
        };
        let named =
            std::num::NonZeroUsize::new(NAMED_CONSUMERS).unwrap_or(std::num::NonZeroUsize::MIN);
        match self.pool {
            PoolKind::Fair => Arc::new(TrackConsumersPool::new(FairSpillPool::new(limit), named)),
            PoolKind::Greedy => {
                Arc::new(TrackConsumersPool::new(GreedyMemoryPool::new(limit), named))
            }
        }
    }
}

/// A size as datafusion-cli and `SET datafusion.runtime.memory_limit` read it: a number
/// with a unit K, M, G or T (`512M`, `1.5G`).
pub fn parse_size(what: &'static str, text: &str) -> Result<usize, EngineError> {
    SessionContext::parse_capacity_limit(what, text).map_err(|_| EngineError::InvalidArgument {
        what,
        detail: format!("expected a size such as 512M or 2G, got {text:?}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_units_as_datafusion_cli_does() {
        assert_eq!(parse_size("--memory-limit", "512M").unwrap(), 512 << 20);
        assert_eq!(parse_size("--memory-limit", "2G").unwrap(), 2 << 30);
        let err = parse_size("--memory-limit", "lots")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--memory-limit") && err.contains("lots"),
            "{err}"
        );
    }

    #[test]
    fn a_limited_budget_gives_a_bounded_pool_and_no_limit_an_unbounded_one() {
        use datafusion::execution::memory_pool::MemoryLimit;
        let limited = HostBudget {
            memory_limit: Some(1 << 20),
            ..HostBudget::default()
        };
        assert!(matches!(limited.pool().memory_limit(), MemoryLimit::Finite(n) if n == 1 << 20));
        assert!(matches!(
            HostBudget::default().pool().memory_limit(),
            MemoryLimit::Infinite
        ));
        assert_eq!("Greedy".parse::<PoolKind>(), Ok(PoolKind::Greedy));
        assert!("lru".parse::<PoolKind>().is_err());
    }
}
