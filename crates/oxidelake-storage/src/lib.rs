//! # oxidelake-storage
//!
//! Lake data is Parquet, pruned by DataFusion's own statistics, page index and Bloom
//! filters; there is no private file format. This crate owns the settings that make that
//! pruning effective (writer properties, session options), the Arrow IPC paths for
//! zero-decode data, and — behind the Linux-only `io-uring` feature — an `ObjectStore`
//! for local files driven by io_uring.
//!
//! - [`LakeParquetWriter`] / [`write_parquet_file`] write Parquet with
//!   [`LakeWriterOptions`]: row groups of whole engine batches, pages of at most one
//!   batch with page statistics (and so a page index), dictionary encoding, Bloom filters
//!   on the key columns named, and `none | lz4 | zstd` compression.
//! - [`lake_session_config`] / [`ScanOptions`] turn statistics, Bloom-filter and
//!   page-index pruning on (or off, to compare).
//! - [`register_parquet`], [`read_parquet`] and [`query`] are the read boundary: a
//!   damaged file is [`oxidelake_core::EngineError::Format`], a failed read
//!   [`oxidelake_core::EngineError::Io`].
//! - [`ParquetFooterGuard`] wraps a session's `file://` store ([`guard_local_parquet_reads`])
//!   and fails, with a typed error, any read that would hand parquet 59.3.2's metadata
//!   decoder a footer length larger than the file (which underflows, and panics with
//!   overflow checks on). Guarding the store covers every Parquet read of the session —
//!   registration, snapshot file lists, external tables, scans — whichever provider
//!   planned it; [`into_engine_error`] turns that error into a `Format` error.
//! - [`ipc`] encodes and decodes 64-byte-aligned, uncompressed Arrow IPC files without
//!   copying column buffers; [`HotCache`] keeps such a copy of a Parquet table and serves
//!   SQL scans from it until the Parquet changes (one copy per source: tables of the same
//!   name over different files never share one).
//!
//! docs/storage.md shows them together.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory` (spec §3).
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod compression;
mod error;
mod footer_guard;
mod hot_cache;
mod read;
mod scan_options;
mod schema_clash;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
mod uring;
mod writer;

pub use compression::ParquetCompression;
pub use error::{ColumnTypeClash, StorageError};
pub use footer_guard::{ParquetFooterGuard, guard_local_parquet_reads};
pub use hot_cache::{CachedTableInfo, HotCache, HotCacheCounters};
pub use oxidelake_memory::ipc;
pub use read::{
    classify_read_error, footer_error_in, into_engine_error, query, read_parquet, register_parquet,
};
pub use scan_options::{ScanOptions, lake_session_config};
#[cfg(all(target_os = "linux", feature = "io-uring"))]
pub use uring::{
    UringLocalFileSystem, UringUnavailable, probe_io_uring, register_uring_file_store,
};
pub use writer::{
    ENGINE_BATCH_ROWS, LakeParquetWriter, LakeWriterOptions, WrittenFile, write_parquet_file,
};
