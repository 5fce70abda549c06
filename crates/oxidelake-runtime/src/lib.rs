//! # oxidelake-runtime
//!
//! Runs plans: `OxideSession::local()` (in-process DataFusion with the placement rule,
//! UDFs and object store) and `OxideSession::connect("df://host:port")` (a Ballista
//! cluster with `OxidePhysicalCodec` installed), the scheduler and executor processes
//! over Ballista ([`cluster`]) and the command line's logic ([`cli`]). The binaries
//! themselves are in `oxidelake-cli`, which also links the SDK's commands.
//!
//! **Allowed internal dependencies:** every other engine crate (core, memory, device,
//! compute, storage, planner, tui) plus the Ballista crates (spec §3).
//!
//! Features `cuda` and `io-uring` are forwarded to the crates that implement
//! them, which makes `cargo check -p oxidelake-runtime --features cuda` the single GPU
//! compile gate.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cli;
pub mod cluster;
mod cluster_url;
mod dashboard;
mod deep_statements;
mod error;
mod functions;
pub mod memory;
mod object_stores;
mod probe;
mod runtime_threads;
mod session;

pub use cluster_url::ClusterUrl;
pub use dashboard::run_dashboard;
pub use deep_statements::{
    MAX_STATEMENT_DEPTH, check_statement_depth, check_statement_depth_in_every_dialect,
    statement_depth,
};
pub use error::RuntimeError;
pub use functions::{oxide_aggregate_udfs, oxide_scalar_udfs};
pub use object_stores::install_object_stores;
pub use oxidelake_compute::checked_sum;
pub use oxidelake_compute::ops::DistanceMetric;
pub use oxidelake_compute::{total_order_max, total_order_min};
pub use oxidelake_core::EngineError;
pub use oxidelake_planner::{PlacementTarget, option_keys};
pub use probe::{DetectorProbe, check_forced_backend};
pub use runtime_threads::{
    PLANNING_STACK_BYTES, RUNTIME_STACK_BYTES, query_runtime, run_with_planning_stack,
};
pub use session::{OxideSession, QueryStream, SessionMode, SpillSummary};
