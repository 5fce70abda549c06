//! # oxidelake-compute
//!
//! OxideLake's own physical operators — fused filter+project, hash join, grouped
//! aggregate and vector distance — as DataFusion `ExecutionPlan`s (`Gpu*Exec`). Each
//! picks its backend at `execute()` time from the local `HardwareDetector`, so the same
//! plan is correct on an executor with or without a GPU; the CPU path (Arrow compute
//! kernels plus rayon) is the semantic reference the device paths must match.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory`,
//! `oxidelake-device` (spec §3).
//!
//! Errors: inside operators DataFusion's `exec_err!`/`internal_err!`; at this crate's
//! boundary [`oxidelake_core::EngineError`], which converts both ways.
//!
//! Status: the operators arrive with the operators issue; today the crate provides the
//! placement label every operator displays.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod placement;

pub use placement::placement_label;
