//! # oxidelake-tui
//!
//! The terminal dashboard: plan DAG with device tags, operator inspector, memory and
//! transfer gauges, column statistics. It reads only `TelemetryHub` snapshots, which is
//! what makes it testable with synthetic data and keeps the engine free of UI code.
//!
//! **Allowed internal dependencies:** `oxidelake-core` (spec §3).
//!
//! Status: the dashboard arrives with the terminal dashboard issue; today the crate
//! defines its error type.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

/// Errors of the dashboard.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuiError {
    /// The terminal could not be set up, drawn to or restored.
    #[error("terminal I/O failed: {0}")]
    Terminal(#[from] std::io::Error),
}
