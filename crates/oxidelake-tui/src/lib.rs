//! # oxidelake-tui
//!
//! The terminal dashboard: plan DAG with hardware tags, operator inspector, memory,
//! transfer and spill gauges, result column statistics. It knows nothing about
//! DataFusion: the runtime turns a running plan and `TelemetryHub` snapshots into
//! [`Update`]s, which is what makes the dashboard testable with synthetic data.
//!
//! [`AppState`] changes only through [`on_event`]; [`render`] is a pure function of it;
//! [`run`] is the loop on a real terminal (synchronized updates, raw mode restored on
//! exit).
//!
//! **Allowed internal dependencies:** `oxidelake-core` (spec §3).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod demo;
mod format;
mod model;
mod render;
mod state;
mod terminal;

pub use demo::demo_state;
pub use model::{
    Capacities, ColumnStats, NodeStats, PlanNode, QueryStatus, Update, hardware_tag, placement_tag,
};
pub use render::{ROOMY, render};
pub use state::{AppState, Event, Key, Panel, Transition, on_event};
pub use terminal::run;

/// Errors of the dashboard.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuiError {
    /// The terminal could not be set up, drawn to or restored.
    #[error("terminal I/O failed: {0}")]
    Terminal(#[from] std::io::Error),
}
