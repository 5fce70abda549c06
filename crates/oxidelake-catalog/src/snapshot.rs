//! Snapshots: the exact Parquet files of one table version, taken from the Delta log.

use std::path::PathBuf;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;

use crate::catalog::loaded_version;
use crate::{Catalog, CatalogError, TableName, read_batches};

/// One version of a table, pinned: reading it later returns the same rows whatever was
/// appended since (as long as its files have not been vacuumed).
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The table.
    pub table: TableName,
    /// The version.
    pub version: i64,
    /// The table schema at that version.
    pub schema: SchemaRef,
    /// The Parquet data files of that version, sorted by path.
    pub files: Vec<SnapshotFile>,
}

/// A Parquet data file of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SnapshotFile {
    /// Absolute local path of the file.
    pub path: PathBuf,
    /// Its size as recorded in the Delta log.
    pub size_bytes: u64,
}

impl Snapshot {
    /// Number of rows in the snapshot, from reading it (the log's statistics are optional).
    ///
    /// Fails like [`read_batches`] if a data file is missing or damaged.
    pub async fn count_rows(&self) -> Result<usize, CatalogError> {
        Ok(read_batches(self)
            .await?
            .iter()
            .map(RecordBatch::num_rows)
            .sum())
    }
}

impl Catalog {
    /// The snapshot of `name` at `version`, or at its latest version when `None`.
    ///
    /// The file list is the set of active `add` actions of the Delta log replayed up to
    /// that version — never a listing of the table directory, which also holds files of
    /// commits that lost their race or have not landed yet. A version the table never had,
    /// or whose log has been cleaned up, is an error, and so is a damaged commit file
    /// ([`CatalogError::CorruptLogEntry`]). The data files are not opened here; every
    /// read of the snapshot checks them.
    pub async fn snapshot(
        &self,
        name: &TableName,
        version: Option<i64>,
    ) -> Result<Snapshot, CatalogError> {
        let table = self.open_delta(name, version).await?;
        let state = table.snapshot().map_err(|e| CatalogError::delta(name, e))?;
        let eager = state.snapshot();
        let log_data = eager
            .try_log_data()
            .map_err(|e| CatalogError::delta(name, e))?;
        let dir = self.table_dir(name);
        let mut files: Vec<SnapshotFile> = log_data
            .iter()
            .map(|file| SnapshotFile {
                // Paths written by this crate are relative to the table root (`path()`
                // decodes them); any other path names no file here, so every read of the
                // snapshot fails with `MissingDataFile` rather than skipping it.
                path: dir.join(file.path().as_ref()),
                size_bytes: u64::try_from(file.size()).unwrap_or(0),
            })
            .collect();
        files.sort();
        Ok(Snapshot {
            table: name.clone(),
            version: loaded_version(name, &table)?,
            schema: eager.arrow_schema(),
            files,
        })
    }
}
