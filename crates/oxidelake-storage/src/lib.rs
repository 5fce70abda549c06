//! # oxidelake-storage
//!
//! Lake data is Parquet, pruned by DataFusion's own statistics, page index and Bloom
//! filters; there is no private file format. This crate owns the settings that make that
//! pruning effective (writer properties, session options), the Arrow IPC paths for
//! zero-decode data, and — behind the Linux-only `io-uring` feature — an `ObjectStore`
//! for local files driven by io_uring.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory` (spec §3).
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod compression;
mod error;

pub use compression::ParquetCompression;
pub use error::StorageError;
