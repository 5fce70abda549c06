//! Making what a commit wrote survive a power loss: `fsync` of files and directories.
//!
//! Data files and commits are written through object_store's `LocalFileSystem` (the data
//! files by `data_writer`, the commits by delta-rs), which never calls `fsync`,
//! so on its own a version reported as committed lives only in the page cache. The
//! catalog therefore syncs, in this order:
//!
//! ```text
//!  append   write Parquet ─▶ fsync data files + their directory ─▶ commit (link N+1.json)
//!                                              ─▶ fsync _delta_log/N+1.json + _delta_log ─▶ Ok(N+1)
//!  create   commit (link 0.json) ─▶ fsync 0.json, _delta_log, <table>, <ns>, tables/ ─▶ Ok
//! ```
//!
//! **Guaranteed:** when `append` returns `Ok(version)` (an INSERT is acknowledged only
//! after that), the version's data files, the directory entries naming them, its commit
//! file and the `_delta_log` entry for it are on stable storage; likewise version 0 and
//! the directories from `_delta_log` up to `tables/` when `create_table` returns.
//!
//! **Not guaranteed:** delta-rs links the commit file into place (readers can see the
//! version) *before* the catalog syncs it, so a power loss in between can take away a
//! version that a reader saw but that was never acknowledged to its writer; a commit
//! file torn that way is then refused by the log check (see `delta_log`), never read as
//! fewer rows. If the sync after the link fails, the append reports
//! [`CatalogError::CommitNotDurable`] rather than success. Checkpoints and
//! `_last_checkpoint` are not synced (a lost or torn one fails a read, or costs replay
//! time; the commits it folds are durable), nor are the directories `Catalog::open`
//! creates above `tables/`.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};

use crate::delta_log::{DELTA_LOG_DIR, commit_path};
use crate::{CatalogError, TableName};

/// An `fsync` (or the `open` before it) that failed, and where.
#[derive(Debug)]
pub(crate) struct SyncFailure {
    /// The file or directory.
    pub(crate) path: PathBuf,
    /// The error.
    pub(crate) source: std::io::Error,
}

impl SyncFailure {
    /// The error of a sync before anything was published.
    pub(crate) fn into_io(self) -> CatalogError {
        CatalogError::io(self.path, self.source)
    }

    /// The error of a sync after `version` of `table` landed.
    pub(crate) fn after_commit(self, table: &TableName, version: i64) -> CatalogError {
        CatalogError::CommitNotDurable {
            table: table.to_string(),
            version,
            path: self.path,
            source: self.source,
        }
    }
}

/// `fsync`s the contents of the file at `path`.
pub(crate) fn sync_file(path: &Path) -> Result<(), SyncFailure> {
    File::open(path)
        .and_then(|file| file.sync_all())
        .map_err(|source| SyncFailure {
            path: path.to_owned(),
            source,
        })
}

/// `fsync`s the directory at `path`, so that the entries created in it (files written,
/// renamed or linked into it) survive a power loss.
#[cfg(unix)]
pub(crate) fn sync_dir(path: &Path) -> Result<(), SyncFailure> {
    // On Unix a directory opens read-only like a file, and `fsync` on it syncs its entries.
    sync_file(path)
}

/// Directories cannot be opened as files here; their entries are made durable by the
/// file system's own metadata journal.
#[cfg(not(unix))]
pub(crate) fn sync_dir(_path: &Path) -> Result<(), SyncFailure> {
    Ok(())
}

/// `fsync`s the data files at `paths`, then each directory holding one and `table_dir`.
pub(crate) fn sync_data_files(table_dir: &Path, paths: &[PathBuf]) -> Result<(), SyncFailure> {
    let mut dirs = BTreeSet::from([table_dir.to_path_buf()]);
    for path in paths {
        sync_file(path)?;
        if let Some(parent) = path.parent() {
            dirs.insert(parent.to_path_buf());
        }
    }
    for dir in &dirs {
        sync_dir(dir)?;
    }
    Ok(())
}

/// `fsync`s the commit file of `version` and the `_delta_log` directory naming it.
pub(crate) fn sync_commit(table_dir: &Path, version: u64) -> Result<(), SyncFailure> {
    sync_file(&commit_path(table_dir, version))?;
    sync_dir(&table_dir.join(DELTA_LOG_DIR))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syncs_existing_files_and_directories_and_names_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("part-0.parquet");
        std::fs::write(&data, b"rows").unwrap();
        sync_file(&data).unwrap();
        sync_dir(dir.path()).unwrap();
        sync_data_files(dir.path(), std::slice::from_ref(&data)).unwrap();

        let log = dir.path().join(DELTA_LOG_DIR);
        std::fs::create_dir(&log).unwrap();
        std::fs::write(commit_path(dir.path(), 3), b"{}").unwrap();
        sync_commit(dir.path(), 3).unwrap();

        let missing = dir.path().join("gone.parquet");
        let failure = sync_data_files(dir.path(), &[data, missing.clone()]).unwrap_err();
        assert_eq!(failure.path, missing);
        assert_eq!(failure.source.kind(), std::io::ErrorKind::NotFound);
        let failure = sync_commit(dir.path(), 4).unwrap_err();
        assert_eq!(failure.path, commit_path(dir.path(), 4));

        let name: TableName = "robots.episodes".parse().unwrap();
        let err = sync_file(&missing).unwrap_err().after_commit(&name, 4);
        assert!(
            matches!(&err, CatalogError::CommitNotDurable { version: 4, path, .. } if *path == missing),
            "{err}"
        );
        let err = sync_file(&missing).unwrap_err().into_io();
        assert!(
            matches!(&err, CatalogError::Io { path, source } if *path == missing && source.kind() == std::io::ErrorKind::NotFound),
            "{err}"
        );
    }
}
