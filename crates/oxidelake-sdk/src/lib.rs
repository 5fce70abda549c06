//! # oxidelake-sdk
//!
//! The client SDK for managed objects: `LakeClient` executes a deliberately narrow
//! `INSERT INTO ns.table (...) VALUES (?, ...)` with typed parameters, streams `FileUpload`
//! parameters into managed storage, and appends the one-row batch with a table-version
//! CAS, so a row becomes visible only once its objects are complete. Queries go through
//! the same `OxideSession` as everything else.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-objects`,
//! `oxidelake-catalog`, `oxidelake-runtime` (AMENDMENTS A4).
//!
//! Status: the client arrives with the managed-objects issue; today the crate defines its
//! error type.
#![forbid(unsafe_code)]

use oxidelake_core::EngineError;

/// Errors of the SDK.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SdkError {
    /// A statement outside the supported INSERT grammar.
    #[error("cannot parse statement at byte {position}: {detail}")]
    Parse {
        /// Byte offset of the problem in the statement.
        position: usize,
        /// What was expected.
        detail: String,
    },
    /// An error from the engine, object store or catalog.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
