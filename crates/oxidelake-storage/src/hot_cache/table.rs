//! `CachedTable`: the table provider that serves a Parquet table from its IPC copy.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use async_trait::async_trait;
use datafusion::catalog::{Session, TableProvider};
use datafusion::datasource::TableType;
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::{ExecutionPlan, collect};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use tokio::sync::Mutex;

use super::Counters;
use super::fingerprint::{FileStamp, fingerprint};

/// What a (re)build produced.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Built {
    pub(crate) source_files: usize,
    pub(crate) rows: u64,
    pub(crate) bytes: u64,
}

/// A Parquet table served from an Arrow IPC copy that is rebuilt when the source changes.
#[derive(Debug)]
pub(crate) struct CachedTable {
    source: Arc<dyn TableProvider>,
    urls: Vec<ListingTableUrl>,
    extension: String,
    store: Arc<dyn ObjectStore>,
    ipc_path: Path,
    counters: Arc<Counters>,
    /// The fingerprint the IPC copy was built from (`None` before the first build).
    built_from: Mutex<Option<Vec<FileStamp>>>,
}

impl CachedTable {
    pub(crate) fn new(
        source: Arc<dyn TableProvider>,
        urls: Vec<ListingTableUrl>,
        extension: String,
        store: Arc<dyn ObjectStore>,
        ipc_path: Path,
        counters: Arc<Counters>,
    ) -> Self {
        Self {
            source,
            urls,
            extension,
            store,
            ipc_path,
            counters,
            built_from: Mutex::new(None),
        }
    }

    /// The Parquet table behind the cache.
    pub(crate) fn source(&self) -> &Arc<dyn TableProvider> {
        &self.source
    }

    /// Rebuilds the IPC copy from the source now.
    pub(crate) async fn refresh(&self, session: &dyn Session) -> Result<Built> {
        let mut built_from = self.built_from.lock().await;
        let stamps = fingerprint(session, &self.urls, &self.extension).await?;
        let built = self.build(session, stamps.len()).await?;
        *built_from = Some(stamps);
        Ok(built)
    }

    async fn build(&self, session: &dyn Session, source_files: usize) -> Result<Built> {
        let plan = self.source.scan(session, None, &[], None).await?;
        let batches = collect(plan, session.task_ctx()).await?;
        let schema = self.source.schema();
        let bytes = oxidelake_memory::ipc::encode_file(&schema, &batches)?;
        let len = bytes.len() as u64;
        self.store
            .put(&self.ipc_path, PutPayload::from(bytes))
            .await
            .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))?;
        self.counters.builds.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_written
            .fetch_add(len, Ordering::Relaxed);
        tracing::info!(path = %self.ipc_path, bytes = len, "hot cache: built IPC copy");
        Ok(Built {
            source_files,
            rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            bytes: len,
        })
    }

    /// The IPC copy's batches, rebuilding it first if the source files changed.
    async fn current_batches(&self, session: &dyn Session) -> Result<Vec<RecordBatch>> {
        {
            let mut built_from = self.built_from.lock().await;
            let stamps = fingerprint(session, &self.urls, &self.extension).await?;
            if built_from.as_ref() != Some(&stamps) {
                tracing::info!(path = %self.ipc_path, "hot cache: source changed, rebuilding");
                self.build(session, stamps.len()).await?;
                *built_from = Some(stamps);
            }
        }
        let raw = self
            .store
            .get(&self.ipc_path)
            .await
            .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))?
            .bytes()
            .await
            .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))?;
        let (schema, batches) = oxidelake_memory::ipc::decode_file(raw)?;
        if schema.fields() != self.source.schema().fields() {
            return Err(DataFusionError::Execution(format!(
                "hot cache file {} does not hold this table's schema",
                self.ipc_path
            )));
        }
        self.counters.ipc_scans.fetch_add(1, Ordering::Relaxed);
        Ok(batches)
    }
}

#[async_trait]
impl TableProvider for CachedTable {
    fn schema(&self) -> SchemaRef {
        self.source.schema()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        session: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        _limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let batches = self.current_batches(session).await?;
        // Spread the batches over the session's partitions, keeping their order inside
        // each partition.
        let partitions = session.config().target_partitions().max(1);
        let mut parts: Vec<Vec<RecordBatch>> =
            vec![Vec::new(); partitions.min(batches.len()).max(1)];
        let count = parts.len();
        for (i, batch) in batches.into_iter().enumerate() {
            parts[i % count].push(batch);
        }
        Ok(MemorySourceConfig::try_new_exec(
            &parts,
            self.schema(),
            projection.cloned(),
        )?)
    }
}
