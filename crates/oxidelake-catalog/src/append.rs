//! `append`: add one batch as table version `expected_version + 1`, or nothing.

use arrow::array::RecordBatch;
use deltalake_core::kernel::Add;

use crate::catalog::loaded_version;
use crate::commit::{CommitOutcome, commit_append_cas};
use crate::data_files::data_file_path;
use crate::data_writer::{delete_data_files, write_data_files};
use crate::durable::{SyncFailure, sync_commit, sync_data_files};
use crate::schema_check::conform_batch;
use crate::{Catalog, CatalogError, TableName};

impl Catalog {
    /// Appends `batch` to the table as version `expected_version + 1` and returns that
    /// version.
    ///
    /// This is the table-version compare-and-swap: if the table is not at
    /// `expected_version`, or another writer commits `expected_version + 1` first, it fails
    /// with [`CatalogError::VersionConflict`] and publishes nothing (the Parquet files it
    /// wrote for the batch are deleted again). A batch whose schema is not the table's
    /// fails with [`CatalogError::SchemaMismatch`] before anything is written. To retry,
    /// re-read [`Catalog::version`] and append again.
    ///
    /// `Ok` means durable: the data files are `fsync`ed before the commit and the commit
    /// file after it (see the `durable` module). If that last `fsync` fails the version
    /// has landed all the same and the error is [`CatalogError::CommitNotDurable`]: do not
    /// append the same rows again without checking the table first.
    pub async fn append(
        &self,
        name: &TableName,
        batch: RecordBatch,
        expected_version: i64,
    ) -> Result<i64, CatalogError> {
        let table = self.open_delta(name, None).await?;
        let current = loaded_version(name, &table)?;
        if current != expected_version {
            return Err(conflict(name, expected_version, current));
        }
        let schema = table
            .snapshot()
            .map_err(|e| CatalogError::delta(name, e))?
            .snapshot()
            .arrow_schema();
        let batch = conform_batch(name, batch, &schema)?;

        let table_dir = self.table_dir(name);
        let adds = write_data_files(name, &table, &table_dir, batch).await?;
        if let Err(e) = sync_added_files(name, &table_dir, &adds) {
            delete_data_files(&table, &adds).await;
            return Err(e);
        }
        let outcome = commit_append_cas(&table, adds.clone())
            .await
            .map_err(|e| CatalogError::delta(name, e))?;
        match outcome {
            CommitOutcome::Landed(version) => {
                let landed = i64::try_from(version).unwrap_or(i64::MAX);
                sync_commit(&table_dir, version).map_err(|f| f.after_commit(name, landed))?;
                tracing::debug!(table = %name, version, "appended {} file(s)", adds.len());
                Ok(landed)
            }
            CommitOutcome::LostRace => {
                delete_data_files(&table, &adds).await;
                // Lists the log from the loaded version on; no replay needed.
                let actual = table
                    .get_latest_version()
                    .await
                    .map_err(|e| CatalogError::delta(name, e))?;
                let actual = i64::try_from(actual).unwrap_or(i64::MAX);
                Err(conflict(name, expected_version, actual))
            }
        }
    }
}

fn conflict(name: &TableName, expected: i64, actual: i64) -> CatalogError {
    CatalogError::VersionConflict {
        table: name.to_string(),
        expected,
        actual,
    }
}

/// `fsync`s the data files that `adds` name (relative to `table_dir`) and the
/// directories holding them, before they are committed.
fn sync_added_files(
    name: &TableName,
    table_dir: &std::path::Path,
    adds: &[Add],
) -> Result<(), CatalogError> {
    let paths = adds
        .iter()
        .map(|add| data_file_path(name, table_dir, &add.path))
        .collect::<Result<Vec<_>, _>>()?;
    sync_data_files(table_dir, &paths).map_err(SyncFailure::into_io)
}
