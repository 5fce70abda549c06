//! `LakeClient`: managed-object INSERTs and queries over one data directory.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use arrow::array::{Array, StructArray};
use arrow::record_batch::RecordBatch;
use datafusion::datasource::TableProvider;
use futures::TryStreamExt;
use oxidelake_catalog::{Catalog, CatalogError, TableName, read_columns, register_snapshot};
use oxidelake_objects::{
    DataLocation, GcPolicy, GcReport, ManagedObjectStore, ObjectPin, Sha256Digest, VerifiedReader,
    from_array, is_data_location,
};
use oxidelake_runtime::{OxideSession, QueryStream};

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

    /// Opens the existing data directory `data_dir`, refusing a path that is not one
    /// (so a mistyped `--data-dir` of a read or collect command is an error rather than
    /// an empty lake that "verifies").
    pub fn open_existing(data_dir: impl AsRef<Path>) -> Result<Self, SdkError> {
        let dir = data_dir.as_ref();
        let is_lake = dir.join("tables").is_dir() || dir.join("objects").is_dir();
        if !is_lake {
            return Err(SdkError::NoLake {
                path: dir.to_path_buf(),
            });
        }
        Self::open(dir)
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
        // Held until this function returns, i.e. until the commit landed or failed: a
        // collector never deletes a pinned object (see `oxidelake_objects::gc`).
        let mut pins: Vec<ObjectPin> = Vec::new();
        for (i, param) in params.iter().enumerate() {
            if let InsertValue::File(upload) = param {
                let store = self.objects.clone();
                let upload = upload.clone();
                let (location, pin) = tokio::task::spawn_blocking(move || {
                    store.put_file_pinned(upload.path(), upload.mime())
                })
                .await
                .map_err(|e| {
                    SdkError::Engine(oxidelake_core::EngineError::Internal(format!(
                        "upload task: {e}"
                    )))
                })??;
                pins.push(pin);
                locations.push(location.clone());
                uploaded.insert(i, location);
            }
        }
        let batch = build_row(&schema, &binding, &params, &uploaded)?;

        for attempt in 0..MAX_APPEND_ATTEMPTS {
            let expected = self.catalog.version(&table).await?;
            match self.catalog.append(&table, batch.clone(), expected).await {
                Ok(version) => {
                    drop(pins);
                    return Ok(InsertOutcome { version, locations });
                }
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
        self.register_latest_snapshots().await?;
        Ok(self.session.sql(query).await?)
    }

    /// [`Self::sql`] as a stream, which also knows the result's schema when it has no
    /// rows (what the Python bindings hand to pyarrow).
    pub async fn sql_stream(&self, query: &str) -> Result<QueryStream, SdkError> {
        self.register_latest_snapshots().await?;
        Ok(self.session.sql_stream(query).await?)
    }

    async fn register_latest_snapshots(&self) -> Result<(), SdkError> {
        for name in self.catalog.list_tables()? {
            let snapshot = self.catalog.snapshot(&name, None).await?;
            register_snapshot(self.session.context(), &name.to_string(), &snapshot)?;
        }
        Ok(())
    }

    /// Opens `location` for reading, verified against its size and digest.
    pub fn open_object(&self, location: &DataLocation) -> Result<VerifiedReader, SdkError> {
        Ok(self.objects.open_verified(location)?)
    }

    /// Every location the latest version of any table references, with its table.
    /// Tables are append-only, so the latest version references everything earlier
    /// ones did. Only the FILE columns are read, batch by batch; a table that cannot be
    /// read completely (a missing data file, a damaged log) is an error, never "no
    /// references".
    pub async fn referenced_locations(&self) -> Result<Vec<(TableName, DataLocation)>, SdkError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        for name in self.catalog.list_tables()? {
            let snapshot = self.catalog.snapshot(&name, None).await?;
            let file_columns: Vec<&str> = snapshot
                .schema
                .fields()
                .iter()
                .filter(|f| is_data_location(f.data_type()))
                .map(|f| f.name().as_str())
                .collect();
            if file_columns.is_empty() {
                continue;
            }
            let mut stream = read_columns(&snapshot, &file_columns).await?;
            while let Some(batch) = stream.try_next().await.map_err(CatalogError::from)? {
                for column in batch.columns() {
                    let column =
                        column
                            .as_any()
                            .downcast_ref::<StructArray>()
                            .ok_or_else(|| {
                                SdkError::Engine(oxidelake_core::EngineError::Internal(format!(
                                    "FILE column of {name} read back as {}",
                                    column.data_type()
                                )))
                            })?;
                    for location in from_array(column)?.into_iter().flatten() {
                        if seen.insert((location.uri().to_string(), location.sha256())) {
                            out.push((name.clone(), location));
                        }
                    }
                }
            }
        }
        Ok(out)
    }

    /// The digests of [`Self::referenced_locations`].
    pub async fn referenced_objects(&self) -> Result<HashSet<Sha256Digest>, SdkError> {
        Ok(self
            .referenced_locations()
            .await?
            .into_iter()
            .map(|(_, l)| l.sha256())
            .collect())
    }

    /// Deletes objects no committed table version references and no in-flight INSERT
    /// pins, that are older than the policy's retention (see
    /// [`oxidelake_objects::GcRun`] for why this order of reads is safe).
    pub async fn gc(&self, policy: GcPolicy) -> Result<GcReport, SdkError> {
        let run = self.objects.begin_gc(policy)?;
        let referenced = self.referenced_objects().await?;
        let report = tokio::task::spawn_blocking(move || run.collect(&referenced))
            .await
            .map_err(|e| {
                SdkError::Engine(oxidelake_core::EngineError::Internal(format!(
                    "gc task: {e}"
                )))
            })??;
        Ok(report)
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
