//! Exposing a [`Snapshot`] to SQL as a plain Parquet listing table.
//!
//! DataFusion can read Delta through delta-rs's own provider, but that provider's physical
//! scan (`DeltaScanExec`) has no protobuf codec, so a Ballista cluster session cannot ship
//! it to executors. A `ListingTable` over the snapshot's explicit file paths is encoded by
//! `datafusion-proto` and plans to `DataSourceExec(ParquetSource)`, which executors run.
//! It is exact for these tables: protocol reader 1 / writer 2 (no deletion vectors, no
//! column mapping), unpartitioned, append-only — so the Parquet files hold precisely the
//! snapshot's rows under the logical column names.
//!
//! Each file becomes a `ListingTableUrl` built from its `file://` URL with no glob, so a
//! data directory whose path holds `[`, `?` or `*` is read like any other. The files are
//! checked (present, with the size the log recorded) when the provider is built: a listing
//! table reads a file it cannot find as an empty directory, that is as no rows. A file
//! deleted after that check and before the scan is planned is not caught here; the
//! catalog itself never deletes a committed file (only a vacuum would), and
//! [`crate::read_batches`] / [`crate::read_columns`] scan the files directly, where a
//! missing file is always an error.

use std::sync::Arc;

use datafusion::catalog::MemorySchemaProvider;
use datafusion::common::{TableReference, plan_datafusion_err};
use datafusion::datasource::TableProvider;
use datafusion::datasource::empty::EmptyTable;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::prelude::SessionContext;

use crate::data_files::{check_data_files, file_url};
use crate::{CatalogError, Snapshot};

/// A table provider that scans exactly the files of `snapshot` with its schema.
///
/// A snapshot with no files (a table with no appends yet) becomes an empty table. Fails
/// with [`CatalogError::MissingDataFile`] or [`CatalogError::DataFileSizeMismatch`] if a
/// file of the snapshot is not on disk as committed.
pub fn snapshot_table_provider(
    snapshot: &Snapshot,
) -> Result<Arc<dyn TableProvider>, CatalogError> {
    check_data_files(snapshot)?;
    let schema = Arc::clone(&snapshot.schema);
    if snapshot.files.is_empty() {
        // `ListingTableConfig` requires at least one path.
        return Ok(Arc::new(EmptyTable::new(schema)));
    }
    let urls = snapshot
        .files
        .iter()
        .map(|file| -> Result<ListingTableUrl, CatalogError> {
            let url = file_url(&snapshot.table, &file.path)?;
            // `try_new` with no glob: `ListingTableUrl::parse` would read `[`, `?` and `*`
            // in the path as a glob pattern.
            Ok(ListingTableUrl::try_new(url, None)?)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema);
    Ok(Arc::new(ListingTable::try_new(config)?))
}

/// Registers `snapshot` in `ctx` as the table `name`, replacing a table of that name.
///
/// `name` is a SQL table reference: `robots.episodes` registers table `episodes` in schema
/// `robots` of the session's default catalog, creating that schema (in memory) if it is
/// missing, so that `SELECT * FROM robots.episodes` works. The registration is pinned: rows
/// appended later are not visible until the newer snapshot is registered.
pub fn register_snapshot(
    ctx: &SessionContext,
    name: &str,
    snapshot: &Snapshot,
) -> Result<(), CatalogError> {
    let provider = snapshot_table_provider(snapshot)?;
    let reference = TableReference::from(name);
    if let Some(schema) = reference.schema() {
        let catalog_name = match reference.catalog() {
            Some(catalog) => catalog.to_owned(),
            None => ctx.state().config_options().catalog.default_catalog.clone(),
        };
        let catalog = ctx
            .catalog(&catalog_name)
            .ok_or_else(|| plan_datafusion_err!("no catalog named {catalog_name}"))?;
        if catalog.schema(schema).is_none() {
            catalog.register_schema(schema, Arc::new(MemorySchemaProvider::new()))?;
        }
    }
    ctx.deregister_table(reference.clone())?;
    ctx.register_table(reference, provider)?;
    Ok(())
}
