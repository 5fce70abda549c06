//! A statement's result as a stream of batches, so a caller prints (or stops) batch by
//! batch instead of holding the whole result; what the query spilled is counted when the
//! stream ends, fails or is dropped.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use oxidelake_core::{EngineError, TelemetryHub};

use super::{SessionMode, SpillSummary};
use crate::memory::SpillAccount;

/// The running result of one statement.
pub struct QueryStream {
    schema: SchemaRef,
    inner: SendableRecordBatchStream,
    /// The executing plan, whose metrics hold its spills (`None` for answers computed
    /// without one: plain EXPLAIN, CACHE TABLE).
    plan: Option<Arc<dyn ExecutionPlan>>,
    spills: SpillAccount,
    mode: SessionMode,
}

impl std::fmt::Debug for QueryStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryStream")
            .field("schema", &self.schema)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl QueryStream {
    /// A stream over an executing plan.
    pub(super) fn running(
        plan: Arc<dyn ExecutionPlan>,
        inner: SendableRecordBatchStream,
        mode: SessionMode,
    ) -> Self {
        Self {
            schema: inner.schema(),
            inner,
            plan: Some(plan),
            spills: SpillAccount::default(),
            mode,
        }
    }

    /// A stream over batches already computed.
    pub(super) fn ready(schema: SchemaRef, batches: Vec<RecordBatch>, mode: SessionMode) -> Self {
        let inner = RecordBatchStreamAdapter::new(
            Arc::clone(&schema),
            futures::stream::iter(batches.into_iter().map(Ok)),
        );
        Self {
            schema,
            inner: Box::pin(inner),
            plan: None,
            spills: SpillAccount::default(),
            mode,
        }
    }

    /// The result's columns (known before the first batch, so an empty result still
    /// has a header).
    pub fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    /// The executing plan (`None` for an answer computed without one): on a cluster,
    /// the `DistributedQueryExec` that learns its job's id once the scheduler accepts it.
    pub(crate) fn plan(&self) -> Option<&Arc<dyn ExecutionPlan>> {
        self.plan.as_ref()
    }

    /// The next batch; `None` once the result is complete.
    pub async fn next(&mut self) -> Option<Result<RecordBatch, EngineError>> {
        let item = self.inner.next().await;
        if !matches!(item, Some(Ok(_))) {
            self.observe_spills();
        }
        item.map(|r| r.map_err(|e| self.engine_error(e)))
    }

    /// Every remaining batch ([`Self::spills`] then has the whole query's).
    pub async fn collect(&mut self) -> Result<Vec<RecordBatch>, EngineError> {
        let mut batches = Vec::new();
        while let Some(batch) = self.next().await {
            batches.push(batch?);
        }
        Ok(batches)
    }

    /// What the query has spilled to disk so far (all of it once the stream ended).
    pub fn spills(&mut self) -> SpillSummary {
        self.observe_spills();
        SpillSummary {
            files: self.spills.files(),
            bytes: self.spills.bytes(),
            held_in_host_bytes: self.spills.held_in_host_bytes(),
        }
    }

    fn observe_spills(&mut self) {
        if let Some(plan) = &self.plan {
            self.spills.observe(plan, &TelemetryHub::global());
        }
    }

    fn engine_error(&self, e: datafusion::error::DataFusionError) -> EngineError {
        self.mode.query_error(e)
    }
}

impl Drop for QueryStream {
    /// A cancelled query's spill files were written all the same.
    fn drop(&mut self) {
        self.observe_spills();
    }
}
