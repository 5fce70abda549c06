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

/// The copy as of one fingerprint.
#[derive(Debug)]
struct ResidentCopy {
    /// The fingerprint of the source files the copy was built from.
    built_from: Vec<FileStamp>,
    /// The IPC copy in memory: its bytes (the same bytes as the file) decoded in place,
    /// so every buffer is 64-byte aligned and nothing was copied. Scans serve these
    /// without touching the disk; cloning them clones `Arc`s, not data.
    batches: Vec<RecordBatch>,
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
    /// `None` before the first build.
    copy: Mutex<Option<ResidentCopy>>,
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
            copy: Mutex::new(None),
        }
    }

    /// The Parquet table behind the cache.
    pub(crate) fn source(&self) -> &Arc<dyn TableProvider> {
        &self.source
    }

    /// Rebuilds the IPC copy from the source now.
    pub(crate) async fn refresh(&self, session: &dyn Session) -> Result<Built> {
        let mut copy = self.copy.lock().await;
        let stamps = fingerprint(session, &self.urls, &self.extension).await?;
        let (built, batches) = self.build(session, stamps.len()).await?;
        *copy = Some(ResidentCopy {
            built_from: stamps,
            batches,
        });
        Ok(built)
    }

    /// Scans the source, writes the IPC file, and returns the copy decoded in place.
    async fn build(
        &self,
        session: &dyn Session,
        source_files: usize,
    ) -> Result<(Built, Vec<RecordBatch>)> {
        let plan = self.source.scan(session, None, &[], None).await?;
        let batches = collect(plan, session.task_ctx()).await?;
        let schema = self.source.schema();
        let bytes = bytes::Bytes::from(oxidelake_memory::ipc::encode_file(&schema, &batches)?);
        let len = bytes.len() as u64;
        self.store
            .put(&self.ipc_path, PutPayload::from(bytes.clone()))
            .await
            .map_err(|e| DataFusionError::ObjectStore(Box::new(e)))?;
        let (_, copy) = oxidelake_memory::ipc::decode_file(bytes)?;
        self.counters.builds.fetch_add(1, Ordering::Relaxed);
        self.counters
            .bytes_written
            .fetch_add(len, Ordering::Relaxed);
        tracing::info!(path = %self.ipc_path, bytes = len, "hot cache: built IPC copy");
        let built = Built {
            source_files,
            rows: batches.iter().map(|b| b.num_rows() as u64).sum(),
            bytes: len,
        };
        Ok((built, copy))
    }

    /// The copy's batches, rebuilding it first if the source files changed.
    async fn current_batches(&self, session: &dyn Session) -> Result<Vec<RecordBatch>> {
        let mut copy = self.copy.lock().await;
        let stamps = fingerprint(session, &self.urls, &self.extension).await?;
        let current = match copy.take() {
            Some(current) if current.built_from == stamps => current,
            _ => {
                tracing::info!(path = %self.ipc_path, "hot cache: source changed, rebuilding");
                let (_, batches) = self.build(session, stamps.len()).await?;
                ResidentCopy {
                    built_from: stamps,
                    batches,
                }
            }
        };
        let batches = current.batches.clone();
        *copy = Some(current);
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
