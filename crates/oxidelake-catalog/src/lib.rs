//! # oxidelake-catalog
//!
//! Versioned, namespaced tables (`robots.episodes`) whose data are Delta Lake tables:
//! Parquet files plus a commit log whose put-if-absent commit of version N+1 is the
//! table-version compare-and-swap. `append(table, batch, expected_version)` makes new
//! rows visible atomically or fails with a version conflict.
//!
//! **Allowed internal dependencies:** `oxidelake-core` (AMENDMENTS A4).
//!
//! Status: the Delta-backed append arrives with the managed-objects issue; today the
//! crate defines table names and its error type.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod error;
mod table_name;

pub use error::CatalogError;
pub use table_name::TableName;
