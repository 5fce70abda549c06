//! # oxidelake-core
//!
//! The vocabulary every other OxideLake crate speaks: the engine-wide error type
//! ([`EngineError`]), how devices and backends are named ([`DeviceId`], [`BackendKind`]),
//! how buffers must be laid out for host and device ([`BufferLayout`]), the stream of
//! Arrow batches operators exchange ([`BatchStream`]), and the [`TelemetryHub`] that is the
//! only coupling between the engine and the terminal dashboard.
//!
//! **Allowed internal dependencies:** none. This crate is the root of the crate graph
//! (spec §3); everything else may depend on it.
//!
//! Why it is this small: every crate links it, so anything placed here is compiled into
//! everything. It holds types and counters, never algorithms.
//!
//! ```text
//!   engine crates ──record──▶ TelemetryHub ──snapshot()──▶ TUI / CLI / tests
//!        │                                                   (plain values)
//!        └── Result<_, EngineError> ◀──▶ DataFusionError (operators, sessions)
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod device;
mod error;
mod layout;
mod stream;
mod telemetry;

pub use device::{BackendKind, DeviceId, MemoryTier, ParseBackendKindError};
pub use error::{BoxError, EngineError};
pub use layout::{BufferLayout, DEVICE_ALIGN_BYTES, HOST_ALIGN_BYTES};
pub use stream::BatchStream;
pub use telemetry::{
    MAX_OPERATORS, MemoryGauges, OperatorSnapshot, OperatorTelemetry, SpillSnapshot, TelemetryHub,
    TelemetrySnapshot, TransferSnapshot,
};
