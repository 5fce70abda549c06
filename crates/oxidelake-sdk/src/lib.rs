//! # oxidelake-sdk
//!
//! The client SDK for managed objects: [`LakeClient`] executes a deliberately narrow
//! `INSERT INTO ns.table (...) VALUES (?, ...)` with typed parameters ([`InsertValue`],
//! [`FileUpload`]), streams file parameters into the managed object store, and appends
//! the one-row batch with the table-version CAS, so a row — and the objects it points
//! at — become visible only when that commit lands. Queries go through an
//! `OxideSession` over the latest committed snapshots.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-objects`,
//! `oxidelake-catalog`, `oxidelake-runtime` (AMENDMENTS A4).
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod cli;
mod client;
pub mod commands;
mod error;
mod insert;
mod row;
mod value;

pub use client::{InsertOutcome, LakeClient, MAX_APPEND_ATTEMPTS};
pub use error::SdkError;
pub use insert::{InsertStatement, parse_insert};
pub use value::{FileUpload, InsertValue};

// The types of LakeClient's signatures and errors, so a caller (the Python bindings of
// `oxidelake-api`) needs no direct dependency on the crates below the SDK.
pub use oxidelake_catalog::CatalogError;
pub use oxidelake_objects::{
    DataLocation, GcPolicy, GcReport, ObjectError, Sha256Digest, VerifiedReader,
    parse_retention_hours, verification_error,
};
