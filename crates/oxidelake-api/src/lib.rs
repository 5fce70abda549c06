//! # oxidelake-api
//!
//! The user-facing DataFrame and SQL API over an `OxideSession` (embedded or cluster),
//! with `l2_distance` / `cosine_distance` as SQL functions. The `python` feature (off by
//! default) adds the `oxidelake` Python module (PyO3), built as a wheel by maturin from
//! `pyproject.toml` beside this crate (docs/python.md).
//!
//! ```text
//! Session ──read_parquet / table / sql──▶ DataFrame ──filter / select / join /
//!    │                                        │        aggregate / vector_distance──▶ DataFrame
//!    ▼                                        ▼
//! OxideSession ◀──────────────────── explain / collect: planned with the session's
//! (placement rule, UDFs)                 state at the moment they are called
//! ```
//!
//! A [`DataFrame`] is lazy: each method adds to a DataFusion logical plan. `collect` and
//! `explain` plan it with the session's state *at that moment*, so a
//! `SET oxidelake.placement.target = 'cuda'` issued after the DataFrame was built still
//! applies, and `explain` shows the same placement tags as `EXPLAIN` in SQL.
//!
//! **Allowed internal dependencies:** `oxidelake-runtime` (and through it everything
//! below) (spec §3).
//!
//! Errors: the engine-wide `EngineError`, re-exported as [`Error`].
//!
//! See `docs/api.md` for a runnable example.
// PyO3's macros expand to unsafe FFI glue: unsafe code is denied everywhere but the
// `python` module (the `python` feature).
#![deny(unsafe_code)]

mod dataframe;
#[cfg(feature = "python")]
#[allow(unsafe_code)]
mod python;
mod session;
mod vector;

pub use arrow::record_batch::RecordBatch;
pub use dataframe::DataFrame;
pub use datafusion::functions_aggregate::expr_fn::count;
pub use datafusion::prelude::{Expr, col, lit};
pub use oxidelake_runtime::EngineError as Error;
// `sum` is OxideLake's, which raises an overflow error over integers and decimals where
// DataFusion's `expr_fn::sum` wraps (docs/sql-semantics.md).
pub use oxidelake_runtime::{DistanceMetric, OxideSession, PlacementTarget, checked_sum as sum};
// `min` and `max` are OxideLake's, whose grouped form orders floats (NaN, ±inf) as the
// ungrouped form does, where DataFusion's `expr_fn::{min, max}` do not
// (docs/upstream-defects.md).
pub use oxidelake_runtime::{total_order_max as max, total_order_min as min};
pub use session::Session;

/// Result type of the API.
pub type Result<T> = std::result::Result<T, Error>;
