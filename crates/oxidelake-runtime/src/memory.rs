//! The host memory budget of embedded sessions: DataFusion's memory pool, with the
//! engine's own operators as consumers of it, seen by the telemetry hub.
//!
//! - [`HostBudget`] is what `oxide sql --memory-limit/--disk-limit/--mem-pool-type` ask
//!   for; the session installs it as its runtime environment's pool and disk manager.
//! - [`TelemetryPool`] wraps whatever pool is in force (also one installed later by
//!   `SET datafusion.runtime.memory_limit`), so the hub's host gauge is the bytes the
//!   query's operators hold, and the session can report the peak.
//! - [`SpillAccount`] moves the spill figures DataFusion's operators keep in their
//!   metrics (`spill_count`, `spilled_bytes`) into the hub, once per query and, under
//!   the dashboard, while it runs.

mod budget;
mod pool;
mod spills;

pub use budget::{HostBudget, PoolKind, parse_size};
pub use pool::{HostMemory, TelemetryPool};
pub(crate) use spills::SpillAccount;
