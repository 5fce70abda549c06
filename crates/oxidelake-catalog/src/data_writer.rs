//! Writing an append's Parquet data files: encoded in memory by delta-rs, then put into
//! the table's directory by the catalog.
//!
//! delta-rs's writer uploads each file through object_store's `BufWriter`. When the
//! upload fails while it completes — a full disk at the final `put` — delta-rs aborts the
//! `BufWriter`, which object_store forbids once shutdown has begun: `abort` panics
//! ("Already shut down"). delta-rs 1.1.3 catches that panic, so the append still failed
//! with one error, but the panic hook had already printed the panic, with a backtrace
//! (issue 44). So delta-rs encodes into an in-memory store, where that `put` cannot fail,
//! and the finished files are put into the table's store here: a write error is then an
//! ordinary error of that `put` ([`CatalogError::DataFileWrite`], naming the file), and
//! the files put before it are deleted again.
//!
//! ```text
//!  batch ─▶ delta-rs DeltaWriter ─▶ in-memory store: encoded files + their Add actions
//!                                        │ one put per file
//!                                        ▼
//!            table store: <table>/part-…parquet ── error ─▶ delete the ones put, fail
//! ```
//!
//! The writer is configured as delta-rs's `RecordBatchWriter::for_table` configures it
//! (Snappy, no size roll, the table's statistics settings), so the files and their `add`
//! actions (statistics included) are the ones it wrote. Cost: an append's encoded files
//! are held in memory once before they are written, beside the batch itself.

use std::path::Path as LocalPath;
use std::sync::Arc;

use arrow::array::RecordBatch;
use datafusion::object_store::memory::InMemory;
use datafusion::object_store::{ObjectStore, ObjectStoreExt};
use deltalake_core::datafile::writer::{DeltaWriter, WriterConfig};
use deltalake_core::kernel::Add;
use deltalake_core::table::config::TablePropertiesExt;
use deltalake_core::{DeltaTable, DeltaTableError, Path};

use crate::{CatalogError, TableName};

/// The table property naming the columns to collect statistics for, read as delta-rs's
/// `RecordBatchWriter` reads it.
const STATS_COLUMNS: &str = "delta.dataSkippingStatsColumns";

/// Writes `batch` as Parquet file(s) in the table directory `table_dir` of `table` and
/// returns their `add` actions; they are not part of any version until a commit adds
/// them. On an error no file of the batch is left behind (best effort, as for a lost
/// commit race).
pub(crate) async fn write_data_files(
    name: &TableName,
    table: &DeltaTable,
    table_dir: &LocalPath,
    batch: RecordBatch,
) -> Result<Vec<Add>, CatalogError> {
    let staging: Arc<dyn ObjectStore> = Arc::new(InMemory::new());
    let adds = encode(table, Arc::clone(&staging), batch)
        .await
        .map_err(|e| CatalogError::delta(name, e))?;
    for (published, add) in adds.iter().enumerate() {
        if let Err(e) = publish(name, table, table_dir, staging.as_ref(), add).await {
            delete_data_files(table, &adds[..published]).await;
            return Err(e);
        }
    }
    Ok(adds)
}

/// Encodes `batch` into `staging` with the table's writer settings.
async fn encode(
    table: &DeltaTable,
    staging: Arc<dyn ObjectStore>,
    batch: RecordBatch,
) -> Result<Vec<Add>, DeltaTableError> {
    let state = table.snapshot()?;
    let stats_columns = state
        .metadata()
        .configuration()
        .get(STATS_COLUMNS)
        .map(|columns| columns.split(',').map(str::to_string).collect());
    let config = WriterConfig::new(
        batch.schema(),
        Vec::new(),
        None,
        None,
        None,
        state.table_config().num_indexed_cols(),
        stats_columns,
    );
    let mut writer = DeltaWriter::new(staging, config);
    writer.write(&batch).await?;
    writer.close().await
}

/// Puts the encoded file that `add` names from `staging` into the table's store.
async fn publish(
    name: &TableName,
    table: &DeltaTable,
    table_dir: &LocalPath,
    staging: &dyn ObjectStore,
    add: &Add,
) -> Result<(), CatalogError> {
    let failed = |source: deltalake_core::ObjectStoreError| CatalogError::DataFileWrite {
        table: name.to_string(),
        path: table_dir.join(&add.path),
        source: Box::new(source),
    };
    let path = Path::parse(&add.path).map_err(|e| failed(e.into()))?;
    // Reading back from memory only fails if the writer lost its own file.
    let bytes = staging
        .get(&path)
        .await
        .map_err(failed)?
        .bytes()
        .await
        .map_err(failed)?;
    table
        .object_store()
        .put(&path, bytes.into())
        .await
        .map_err(failed)?;
    Ok(())
}

/// Best-effort removal of the data files of an append that will not commit (a lost race,
/// a failed write or sync). A failure leaves an orphan that no snapshot references
/// (Delta's full vacuum removes such files).
pub(crate) async fn delete_data_files(table: &DeltaTable, adds: &[Add]) {
    let store = table.object_store();
    for add in adds {
        let path = Path::parse(&add.path).unwrap_or_else(|_| Path::from(add.path.as_str()));
        if let Err(e) = store.delete(&path).await {
            tracing::warn!(path = %add.path, error = %e, "could not delete an unpublished data file");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fmt;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use arrow::array::Int64Array;
    use arrow::datatypes::{DataType, Field, Schema};
    use async_trait::async_trait;
    use datafusion::object_store::local::LocalFileSystem;
    use datafusion::object_store::{
        CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta,
        PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
    };
    use deltalake_core::DeltaTableBuilder;
    use futures::stream::BoxStream;
    use url::Url;

    use super::*;
    use crate::Catalog;

    /// A local file system that is full: writing a Parquet file fails as `write(2)` does
    /// on a full disk; everything else (the Delta log) works.
    #[derive(Debug)]
    struct FullDisk {
        inner: LocalFileSystem,
    }

    impl FullDisk {
        fn refuse(location: &Path) -> Option<deltalake_core::ObjectStoreError> {
            location.as_ref().ends_with(".parquet").then(|| {
                deltalake_core::ObjectStoreError::Generic {
                    store: "FullDisk",
                    source: Box::new(std::io::Error::new(
                        std::io::ErrorKind::StorageFull,
                        "No space left on device",
                    )),
                }
            })
        }
    }

    impl fmt::Display for FullDisk {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "FullDisk({})", self.inner)
        }
    }

    #[async_trait]
    impl ObjectStore for FullDisk {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            opts: PutOptions,
        ) -> Result<PutResult> {
            match Self::refuse(location) {
                Some(full) => Err(full),
                None => self.inner.put_opts(location, payload, opts).await,
            }
        }

        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> Result<Box<dyn MultipartUpload>> {
            match Self::refuse(location) {
                Some(full) => Err(full),
                None => self.inner.put_multipart_opts(location, opts).await,
            }
        }

        async fn get_opts(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
            self.inner.get_opts(location, options).await
        }

        fn delete_stream(
            &self,
            locations: BoxStream<'static, Result<Path>>,
        ) -> BoxStream<'static, Result<Path>> {
            self.inner.delete_stream(locations)
        }

        fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
            self.inner.list(prefix)
        }

        async fn list_with_delimiter(&self, prefix: Option<&Path>) -> Result<ListResult> {
            self.inner.list_with_delimiter(prefix).await
        }

        async fn copy_opts(&self, from: &Path, to: &Path, options: CopyOptions) -> Result<()> {
            self.inner.copy_opts(from, to, options).await
        }
    }

    /// Counts the panics raised on this thread from now on — caught ones too: the panic
    /// hook prints a panic before anything catches it. Every panic still reaches the hook
    /// that was installed before.
    fn count_panics_on_this_thread() -> Arc<AtomicUsize> {
        let count = Arc::new(AtomicUsize::new(0));
        let (seen, thread) = (Arc::clone(&count), std::thread::current().id());
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if std::thread::current().id() == thread {
                seen.fetch_add(1, Ordering::SeqCst);
            }
            previous(info);
        }));
        count
    }

    fn parquet_files(dir: &LocalPath) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|path| path.extension().is_some_and(|e| e == "parquet"))
            .collect()
    }

    // A current-thread runtime: the writer's upload tasks run on this thread, where the
    // panic counter looks.
    #[tokio::test(flavor = "current_thread")]
    async fn a_full_disk_while_an_append_writes_its_parquet_file_is_one_error_and_no_panic() {
        let dir = tempfile::tempdir().unwrap();
        let catalog = Catalog::open(dir.path()).unwrap();
        let name: TableName = "t.full".parse().unwrap();
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        catalog.create_table(&name, schema.clone()).await.unwrap();
        let table_dir = catalog.table_dir(&name);
        let url = Url::from_directory_path(&table_dir).unwrap();
        let full: Arc<dyn ObjectStore> = Arc::new(FullDisk {
            inner: LocalFileSystem::new(),
        });
        let table = DeltaTableBuilder::from_url(url.clone())
            .unwrap()
            .with_storage_backend(full, url)
            .load()
            .await
            .unwrap();
        let batch =
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(vec![1, 2, 3]))]).unwrap();

        let panics = count_panics_on_this_thread();
        let err = write_data_files(&name, &table, &table_dir, batch)
            .await
            .unwrap_err();
        assert_eq!(
            panics.load(Ordering::SeqCst),
            0,
            "a write error panicked (and printed the panic) on its way to {err}"
        );
        assert!(
            matches!(err, CatalogError::DataFileWrite { .. })
                && err.to_string().contains("No space left on device")
                && err.to_string().contains(".parquet"),
            "one error naming the file and the cause: {err}"
        );
        assert!(
            parquet_files(&table_dir).is_empty(),
            "nothing of the batch is left behind"
        );
    }
}
