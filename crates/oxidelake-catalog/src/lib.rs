//! # oxidelake-catalog
//!
//! Versioned, namespaced tables (`robots.episodes`) whose data are Delta Lake tables:
//! Parquet files plus a commit log whose put-if-absent commit of version N+1 is the
//! table-version compare-and-swap. `append(table, batch, expected_version)` makes new
//! rows visible atomically or fails with a version conflict (AMENDMENTS A4).
//!
//! **Allowed internal dependencies:** `oxidelake-core` (AMENDMENTS A4).
//!
//! ```text
//!  <data_dir>/tables/<ns>/<table>/
//!      part-…-<uuid>-c000.snappy.parquet   data files (written before their commit)
//!      _delta_log/00000000000000000000.json version 0: protocol + schema (create_table)
//!      _delta_log/00000000000000000001.json version 1: `add` of the first batch
//!      …
//!
//!  append(t, batch, N) ──write Parquet──▶ put-if-absent _delta_log/<N+1>.json
//!                                            │ landed: rows visible from N+1 on
//!                                            └ exists: VersionConflict, files deleted
//!
//!  snapshot(t, v) ──check commits, replay log to v──▶ Snapshot { version, schema, files }
//!        ├─ read_batches(&snapshot)                      DataFusion over exactly those files
//!        ├─ read_columns(&snapshot, &["file"])           the same, some columns, streamed
//!        └─ register_snapshot(ctx, "ns.table", &snapshot) ListingTable for SQL / Ballista
//! ```
//!
//! ## Exact reads
//!
//! Garbage collection of managed objects reads every table's latest snapshot to learn
//! which objects are referenced, so a read that silently returns fewer rows deletes
//! committed data. Every read is therefore exact or an error:
//!
//! * every commit file a load replays is checked to be whole before delta-rs parses it
//!   ([`CatalogError::CorruptLogEntry`]; delta-rs would read an empty one as no actions);
//! * every data file of a snapshot is checked to be on disk with the size its commit
//!   recorded ([`CatalogError::MissingDataFile`], [`CatalogError::DataFileSizeMismatch`]),
//!   and [`read_batches`] / [`read_columns`] scan the listed files directly, never a listing;
//! * file paths become URLs without globbing, so `[`, `?` or `*` in the data directory's
//!   path is just a character;
//! * [`Catalog::list_tables`] follows symbolic links and fails, rather than skipping, on
//!   anything it cannot examine; only a table whose create never committed version 0 (no
//!   rows) is skipped, with a warning.
//!
//! ## Visibility
//!
//! A row is visible only once the commit of its version lands. `append` writes the
//! batch's Parquet file(s) first and then links `_delta_log/<N+1>.json` into place; until
//! that link succeeds no snapshot lists the files, and if it fails (another writer took
//! N+1) the files are deleted again and [`CatalogError::VersionConflict`] is returned.
//! Readers never list the table directory: a snapshot's files come from the log, so a
//! half-written or losing file is never read. A snapshot — and a table registered from it
//! — stays at its version; later appends appear only in a newer snapshot.
//!
//! ## Design decisions
//!
//! * **Strict compare-and-swap, retries belong to the caller.** Commits use delta-rs with
//!   `max_retries = 0`, so delta-rs never rebases an append onto a newer version; a
//!   caller that wants to retry re-reads [`Catalog::version`] and appends again. A batch
//!   must match the table's schema, checked before anything is written.
//! * **No in-memory state.** Every call replays the table's log (from the last
//!   checkpoint, written every 10 versions of the tables it creates; delta-rs's default is
//!   100), so several catalogs or processes on one directory agree. The cost of each call
//!   grows with the number of versions since the last checkpoint and with the number of
//!   data files; batch appends.
//! * **Only types that survive Delta.** `create_table` rejects a column Delta would read
//!   back as another type (unsigned integers, fixed-size binary, …). Struct columns, such
//!   as a FILE column `Struct{uri, mime, size: Int64, sha256}`, round-trip.
//! * **Plain Parquet scans for SQL.** See [`register_snapshot`]: Ballista cannot run
//!   delta-rs's own scan, so a snapshot is exposed as a listing table over its files.
//!
//! ## Limits
//!
//! * Local filesystem only; the put-if-absent commit needs hard links (ext4, xfs, btrfs,
//!   zfs; not most FUSE mounts). object_store does not fsync, so the catalog does: an
//!   append or create returns `Ok` only once its files and commit are durable, but a
//!   reader may see a commit in the moment between its link and its `fsync` (see the
//!   `durable` module for what is and is not guaranteed).
//! * A crash between writing data files and committing leaves unreferenced Parquet files
//!   (never read; Delta's full vacuum removes them). No vacuum, checkpoint or log clean-up
//!   scheduling is done here.
//! * No schema evolution, partitioning, deletes or multi-table transactions.
#![forbid(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod append;
mod catalog;
mod commit;
mod create;
mod data_files;
mod data_writer;
mod delta_log;
mod durable;
mod error;
mod register;
mod scan;
mod schema_check;
mod snapshot;
mod table_name;

pub use catalog::{Catalog, TableInfo};
pub use error::CatalogError;
pub use register::{register_snapshot, snapshot_table_provider};
pub use scan::{read_batches, read_columns};
pub use snapshot::{Snapshot, SnapshotFile};
pub use table_name::TableName;
