//! `create_table`: commits version 0 of a new Delta table.

use arrow::datatypes::{Field, Schema, SchemaRef};
use deltalake_core::kernel::StructField;
use deltalake_core::kernel::engine::arrow_conversion::{TryIntoArrow, TryIntoKernel};
use deltalake_core::kernel::transaction::CommitProperties;
use deltalake_core::operations::create::CreateBuilder;
use deltalake_core::protocol::SaveMode;
use deltalake_core::{DeltaTableError, TableProperty};

use crate::catalog::TableInfo;
use crate::commit::is_lost_race;
use crate::durable::{SyncFailure, sync_commit, sync_dir};
use crate::schema_check::check_round_trip;
use crate::{Catalog, CatalogError, TableName};

/// Versions between two Delta checkpoints of the tables the catalog creates (delta-rs's
/// default is 100). Every catalog call loads the table from its newest checkpoint and
/// replays, and first checks, each commit after it, so this bounds that work at ten
/// small JSON files; the price is a checkpoint (one Parquet file of the table's live
/// files) written by every tenth commit. Databricks' Delta uses 10 as well.
const CHECKPOINT_INTERVAL: &str = "10";

impl Catalog {
    /// Creates the table `name` with `schema` at version 0 (no rows).
    ///
    /// Fails with [`CatalogError::TableExists`] if the table exists, also when another
    /// writer creates it concurrently (version 0 is committed put-if-absent, no retry), and
    /// with [`CatalogError::UnsupportedColumnType`] for a column Delta would store as a
    /// different type (it has no unsigned integers and no fixed-size binary, for example),
    /// before anything is written. Tables are created `delta.appendOnly = true`.
    ///
    /// `Ok` means durable: version 0's commit file and the directories from `_delta_log`
    /// up to `tables/` are `fsync`ed first; if that fails the table exists all the same
    /// and the error is [`CatalogError::CommitNotDurable`].
    pub async fn create_table(
        &self,
        name: &TableName,
        schema: SchemaRef,
    ) -> Result<TableInfo, CatalogError> {
        let exists = CatalogError::TableExists {
            table: name.to_string(),
        };
        match self.open_delta(name, None).await {
            Ok(_) => return Err(exists),
            Err(CatalogError::TableNotFound { .. }) => {}
            Err(other) => return Err(other),
        }
        let columns = delta_columns(name, &schema)?;

        let created = CreateBuilder::new()
            .with_location(self.table_url_string(name)?)
            .with_table_name(name.to_string())
            .with_columns(columns)
            .with_configuration_property(TableProperty::AppendOnly, Some("true"))
            .with_configuration_property(
                TableProperty::CheckpointInterval,
                Some(CHECKPOINT_INTERVAL),
            )
            .with_save_mode(SaveMode::ErrorIfExists)
            .with_commit_properties(CommitProperties::default().with_max_retries(0))
            .await;
        let table = match created {
            Ok(table) => table,
            Err(e) if is_lost_race(&e) || is_already_exists(&e) => return Err(exists),
            Err(e) => return Err(CatalogError::delta(name, e)),
        };
        sync_created(&self.table_dir(name)).map_err(|f| f.after_commit(name, 0))?;
        tracing::debug!(table = %name, "created table at version 0");
        self.info_of(name, &table)
    }
}

/// `fsync`s version 0's commit, `_delta_log`, and the directories that creating the table
/// may have added entries to: the table directory, its namespace directory and `tables/`
/// (the table directory is always `tables/<ns>/<table>`).
fn sync_created(table_dir: &std::path::Path) -> Result<(), SyncFailure> {
    sync_commit(table_dir, 0)?;
    for dir in table_dir.ancestors().take(3) {
        sync_dir(dir)?;
    }
    Ok(())
}

/// The Delta columns of `schema`, after checking that each converts back to itself.
fn delta_columns(name: &TableName, schema: &Schema) -> Result<Vec<StructField>, CatalogError> {
    let unsupported = |field: &Field| CatalogError::UnsupportedColumnType {
        table: name.to_string(),
        column: field.name().clone(),
        data_type: field.data_type().clone(),
    };
    let mut columns = Vec::with_capacity(schema.fields().len());
    let mut back = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let column: StructField = field
            .as_ref()
            .try_into_kernel()
            .map_err(|_| unsupported(field))?;
        let round_tripped: Field = (&column).try_into_arrow().map_err(|_| unsupported(field))?;
        columns.push(column);
        back.push(round_tripped);
    }
    check_round_trip(name, schema, &Schema::new(back))?;
    Ok(columns)
}

/// Delta's own "a table already exists at that location" (its error type is private, so
/// this matches the message of its `CreateError::TableAlreadyExists`).
fn is_already_exists(err: &DeltaTableError) -> bool {
    matches!(err, DeltaTableError::GenericError { source }
        if source.to_string().contains("already exists"))
}
