//! # oxidelake-planner
//!
//! Decides where operators run and how they travel: `HardwarePlacementRule` (a DataFusion
//! physical optimizer rule that rewrites eligible nodes into `Gpu*Exec` when the target
//! backend is not the CPU) and `OxidePhysicalCodec` (the `PhysicalExtensionCodec` that lets
//! Ballista ship those nodes to executors).
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-compute` (plus
//! `datafusion-proto`) (spec §3).
//!
//! Status: the rule and the codec arrive with the planner issue; today the crate defines
//! the codec's error type.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;

pub use error::CodecError;
