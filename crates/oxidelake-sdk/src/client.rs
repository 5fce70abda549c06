//! `LakeClient`: managed-object INSERTs and queries over one data directory.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::{Array, StructArray};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::TableProvider;
use oxidelake_catalog::{Catalog, CatalogError, TableName, read_batches, register_snapshot};
use oxidelake_objects::{
    DataLocation, GcReport, ManagedObjectStore, Sha256Digest, VerifiedReader, from_array,
    is_data_location,
};
use oxidelake_runtime::OxideSession;

use crate::insert::parse_insert;
use crate::row::{bind, build_row};
use crate::{InsertValue, SdkError};

/// Append attempts before an INSERT gives up on a contended table. Each retry re-reads
/// the table's version and appends the same row again; the uploads are not repeated.
pub const MAX_APPEND_ATTEMPTS: usize = 200;

/// What an INSERT did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InsertOutcome {
    /// The table version the row became visible in.
    pub version: i64,
    /// The locations of the uploaded FILE parameters, in parameter order.
    pub locations: Vec<DataLocation>,
}

/// A client of one local data directory: `<data-dir>/objects` for managed objects,
/// `<data-dir>/tables` for the Delta tables.
#[derive(Debug, Clone)]
pub struct LakeClient {
    data_dir: PathBuf,
    objects: ManagedObjectStore,
    catalog: Catalog,
    session: OxideSession,
}

fn table_name(name: &str) -> Result<TableName, SdkError> {
    name.parse::<TableName>().map_err(SdkError::Catalog)
}

impl LakeClient {
    /// Opens (creating if needed) the data directory `data_dir`.
    pub fn open(data_dir: impl AsRef<Path>) -> Result<Self, SdkError> {
        let data_dir = data_dir.as_ref().to_path_buf();
        Ok(Self {
            objects: ManagedObjectStore::open(&data_dir)?,
            catalog: Catalog::open(&data_dir)?,
            session: OxideSession::local(),
            data_dir,
        })
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The managed object store.
    pub fn objects(&self) -> &ManagedObjectStore {
        &self.objects
    }

    /// The table layer.
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// Creates table `name` (`ns.table`); FILE columns are
    /// [`oxidelake_objects::data_location_field`]s.
    pub async fn create_table(
        &self,
        name: &str,
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<i64, SdkError> {
        Ok(self
            .catalog
            .create_table(&table_name(name)?, schema)
            .await?
            .version)
    }

    /// Executes `INSERT INTO ns.table (c1, ...) VALUES (?, ...)` with `params`.
    ///
    /// Order of work: parse the statement, resolve the table's schema and check every
    /// column, arity, type and nullability (no file is opened before this passes); then
    /// upload every FILE parameter into the object store; then build the one-row batch
    /// and append it with the table-version CAS. The row, and so its objects, become
    /// visible when that commit lands. A lost version race retries the append (not the
    /// uploads) up to [`MAX_APPEND_ATTEMPTS`] times.
    pub async fn execute(
        &self,
        sql: &str,
        params: Vec<InsertValue>,
    ) -> Result<InsertOutcome, SdkError> {
        let statement = parse_insert(sql)?;
        let table = table_name(&statement.table)?;
        let schema = self.catalog.schema(&table).await?;
        let binding = bind(&statement, &schema, &params)?;

        let mut uploaded = HashMap::new();
        let mut locations = Vec::new();
        for (i, param) in params.iter().enumerate() {
            if let InsertValue::File(upload) = param {
                let store = self.objects.clone();
                let upload = upload.clone();
                let location = tokio::task::spawn_blocking(move || {
                    store.put_file(upload.path(), upload.mime())
                })
                .await
                .map_err(|e| {
                    SdkError::Engine(oxidelake_core::EngineError::Internal(format!(
                        "upload task: {e}"
                    )))
                })??;
                locations.push(location.clone());
                uploaded.insert(i, location);
            }
        }
        let batch = build_row(&schema, &binding, &params, &uploaded)?;

        for attempt in 0..MAX_APPEND_ATTEMPTS {
            let expected = self.catalog.version(&table).await?;
            match self.catalog.append(&table, batch.clone(), expected).await {
                Ok(version) => return Ok(InsertOutcome { version, locations }),
                Err(CatalogError::VersionConflict { .. }) => {
                    // A short, varying back-off spreads writers that collided apart.
                    let ms = 1 + (attempt as u64 * 7 + u64::from(std::process::id())) % 13;
                    tokio::time::sleep(Duration::from_millis(ms.min(attempt as u64 + 1))).await;
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(SdkError::Contended {
            table: statement.table,
            attempts: MAX_APPEND_ATTEMPTS,
        })
    }

    /// Runs SQL over the latest committed snapshot of every table (`ns.table` names).
    pub async fn sql(&self, query: &str) -> Result<Vec<RecordBatch>, SdkError> {
        for name in self.catalog.list_tables()? {
            let snapshot = self.catalog.snapshot(&name, None).await?;
            register_snapshot(self.session.context(), &name.to_string(), &snapshot)?;
        }
        Ok(self.session.sql(query).await?)
    }

    /// Opens `location` for reading, verified against its size and digest.
    pub fn open_object(&self, location: &DataLocation) -> Result<VerifiedReader, SdkError> {
        Ok(self.objects.open_verified(location)?)
    }

    /// Every object the latest version of any table references. Tables are
    /// append-only, so the latest version references everything earlier ones did.
    pub async fn referenced_objects(&self) -> Result<HashSet<Sha256Digest>, SdkError> {
        let mut digests = HashSet::new();
        for name in self.catalog.list_tables()? {
            let snapshot = self.catalog.snapshot(&name, None).await?;
            let file_columns: Vec<usize> = snapshot
                .schema
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| is_data_location(f.data_type()))
                .map(|(i, _)| i)
                .collect();
            if file_columns.is_empty() {
                continue;
            }
            for batch in read_batches(&snapshot).await? {
                for i in &file_columns {
                    if let Some(column) = batch.column(*i).as_any().downcast_ref::<StructArray>() {
                        digests.extend(
                            from_array(column)?
                                .into_iter()
                                .flatten()
                                .map(|l| l.sha256()),
                        );
                    }
                }
            }
        }
        Ok(digests)
    }

    /// Deletes objects no table references that are older than `retention` (see
    /// [`ManagedObjectStore::gc`]).
    pub async fn gc(&self, retention: Duration) -> Result<GcReport, SdkError> {
        let referenced = self.referenced_objects().await?;
        Ok(self.objects.gc(&referenced, retention)?)
    }

    /// The SQL table provider of the latest snapshot of `name` (for callers that want
    /// to register it elsewhere).
    pub async fn table_provider(
        &self,
        name: &str,
    ) -> Result<std::sync::Arc<dyn TableProvider>, SdkError> {
        let snapshot = self.catalog.snapshot(&table_name(name)?, None).await?;
        Ok(oxidelake_catalog::snapshot_table_provider(&snapshot)?)
    }
}
