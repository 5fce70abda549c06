//! # oxidelake-objects
//!
//! Managed large objects: the immutable `DataLocation` {uri, mime, size, sha256} a table
//! row points at, its Arrow struct type, the streaming object store under
//! `<data-dir>/objects` that hashes while it writes, and readers that verify the digest
//! when they read.
//!
//! **Allowed internal dependencies:** `oxidelake-core` only (AMENDMENTS A4).
//!
//! Status: the object store arrives with the managed-objects issue; today the crate
//! defines its error type and the SHA-256 digest value.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod digest;
mod error;

pub use digest::Sha256Digest;
pub use error::ObjectError;
