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
//! - [`ipc`] encodes and decodes 64-byte-aligned, uncompressed Arrow IPC files without
//!   copying column buffers; [`HotCache`] keeps such a copy of a Parquet table and serves
//!   SQL scans from it until the Parquet changes.
//!
//! docs/storage.md shows them together.
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory` (spec §3).
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod compression;
mod error;
mod hot_cache;
mod read;
mod scan_options;
#[cfg(all(target_os = "linux", feature = "io-uring"))]
mod uring;
mod writer;

pub use compression::ParquetCompression;
pub use error::StorageError;
pub use hot_cache::{CachedTableInfo, HotCache, HotCacheCounters};
pub use oxidelake_memory::ipc;
pub use read::{classify_read_error, query, read_parquet, register_parquet};
pub use scan_options::{ScanOptions, lake_session_config};
#[cfg(all(target_os = "linux", feature = "io-uring"))]
pub use uring::{
    UringLocalFileSystem, UringUnavailable, probe_io_uring, register_uring_file_store,
};
pub use writer::{
    ENGINE_BATCH_ROWS, LakeParquetWriter, LakeWriterOptions, WrittenFile, write_parquet_file,
};
