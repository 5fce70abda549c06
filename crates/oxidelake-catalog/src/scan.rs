//! Reading a [`Snapshot`]'s rows: a Parquet scan of exactly its files.
//!
//! The scan is built directly (`DataSourceExec` over `ParquetSource`) from the snapshot's
//! file list and the sizes the log recorded: nothing is listed or globbed, so a file that
//! is not there fails the read instead of reading as no rows. The files are also checked
//! up front, for a typed error ([`CatalogError::MissingDataFile`],
//! [`CatalogError::DataFileSizeMismatch`]) rather than a Parquet one.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::object_store::ObjectStoreUrl;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::DataFusionError;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::physical_plan::{
    ExecutionPlan, SendableRecordBatchStream, collect, execute_stream,
};
use datafusion::prelude::SessionContext;

use crate::data_files::{check_data_files, file_url};
use crate::{CatalogError, Snapshot};

/// Reads every row of `snapshot` by scanning exactly its files with DataFusion.
///
/// Rows come back with the snapshot's schema; their order across files is not defined.
/// Everything is collected in memory; to read a few columns batch by batch, use
/// [`read_columns`].
pub async fn read_batches(snapshot: &Snapshot) -> Result<Vec<RecordBatch>, CatalogError> {
    let ctx = SessionContext::new();
    let plan = scan_plan(snapshot, None, ctx.copied_config().target_partitions())?;
    Ok(collect(plan, ctx.task_ctx()).await?)
}

/// Streams the named `columns` (in that order) of every row of `snapshot`, scanning
/// exactly its files and decoding only those columns.
///
/// The files are checked before the stream is returned, as for [`read_batches`]; a file
/// that disappears later fails the stream. A name that is not a column of the snapshot,
/// or one given twice, is [`CatalogError::InvalidProjection`].
pub async fn read_columns(
    snapshot: &Snapshot,
    columns: &[&str],
) -> Result<SendableRecordBatchStream, CatalogError> {
    let projection = column_indices(snapshot, columns)?;
    let ctx = SessionContext::new();
    let plan = scan_plan(
        snapshot,
        Some(projection),
        ctx.copied_config().target_partitions(),
    )?;
    Ok(execute_stream(plan, ctx.task_ctx())?)
}

/// The indices in the snapshot schema of `columns`, each named once.
fn column_indices(snapshot: &Snapshot, columns: &[&str]) -> Result<Vec<usize>, CatalogError> {
    let invalid = |column: &str, reason: &'static str| CatalogError::InvalidProjection {
        table: snapshot.table.to_string(),
        column: column.to_owned(),
        reason,
    };
    let mut seen = HashSet::with_capacity(columns.len());
    columns
        .iter()
        .map(|&column| {
            if !seen.insert(column) {
                return Err(invalid(column, "it is named more than once"));
            }
            snapshot
                .schema
                .index_of(column)
                .map_err(|_| invalid(column, "the table has no such column"))
        })
        .collect()
}

/// The physical scan of `snapshot`'s files, projected to `projection` (all columns when
/// `None`), its files spread over at most `partitions` partitions read concurrently.
fn scan_plan(
    snapshot: &Snapshot,
    projection: Option<Vec<usize>>,
    partitions: usize,
) -> Result<Arc<dyn ExecutionPlan>, CatalogError> {
    check_data_files(snapshot)?;
    let mut files = Vec::with_capacity(snapshot.files.len());
    for file in &snapshot.files {
        let url = file_url(&snapshot.table, &file.path)?;
        // The location decoded straight from the URL: `PartitionedFile::new` would
        // percent-encode some characters of the path a second time.
        let location = ObjectPath::from_url_path(url.path()).map_err(DataFusionError::from)?;
        let mut partitioned = PartitionedFile::new(String::new(), file.size_bytes);
        partitioned.object_meta.location = location;
        files.push(partitioned);
    }
    // No files: no groups, and the plan has no partitions (an empty stream).
    let groups = FileGroup::new(files).split_files(partitions.max(1));
    let source = Arc::new(ParquetSource::new(Arc::clone(&snapshot.schema)));
    let config = FileScanConfigBuilder::new(ObjectStoreUrl::local_filesystem(), source)
        .with_file_groups(groups)
        .with_projection_indices(projection)?
        .build();
    let plan: Arc<dyn ExecutionPlan> = DataSourceExec::from_data_source(config);
    Ok(plan)
}
