//! # oxidelake-api
//!
//! The user-facing DataFrame and SQL API over an `OxideSession` (embedded or cluster),
//! with `l2_distance` / `cosine_distance` as SQL functions. Optional PyO3 bindings sit
//! behind the `python` feature, off by default and outside every gate.
//!
//! **Allowed internal dependencies:** `oxidelake-runtime` (and through it everything
//! below) (spec §3).
//!
//! Errors: the engine-wide `EngineError`, re-exported as [`Error`].
#![forbid(unsafe_code)]

pub use oxidelake_runtime::EngineError as Error;

/// Result type of the API.
pub type Result<T> = std::result::Result<T, Error>;
