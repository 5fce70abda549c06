//! Exposing a [`Snapshot`] to SQL as a plain Parquet listing table.
//!
//! DataFusion can read Delta through delta-rs's own provider, but that provider's physical
//! scan (`DeltaScanExec`) has no protobuf codec, so a Ballista cluster session cannot ship
//! it to executors. A `ListingTable` over the snapshot's explicit file paths is encoded by
//! `datafusion-proto` and plans to `DataSourceExec(ParquetSource)`, which executors run.
//! It is exact for these tables: protocol reader 1 / writer 2 (no deletion vectors, no
//! column mapping), unpartitioned, append-only — so the Parquet files hold precisely the
//! snapshot's rows under the logical column names.

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

use crate::{CatalogError, Snapshot};

/// A table provider that scans exactly the files of `snapshot` with its schema.
///
/// A snapshot with no files (a table with no appends yet) becomes an empty table.
pub fn snapshot_table_provider(
    snapshot: &Snapshot,
) -> Result<Arc<dyn TableProvider>, CatalogError> {
    let schema = Arc::clone(&snapshot.schema);
    if snapshot.files.is_empty() {
        // `ListingTableConfig` requires at least one path.
        return Ok(Arc::new(EmptyTable::new(schema)));
    }
    let urls = snapshot
        .files
        .iter()
        .map(|file| {
            let path = file.path.to_str().ok_or_else(|| {
                plan_datafusion_err!("snapshot file path {:?} is not UTF-8", file.path)
            })?;
            ListingTableUrl::parse(path)
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
