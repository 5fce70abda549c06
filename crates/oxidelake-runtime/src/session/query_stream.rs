//! A statement's result as a stream of batches, so a caller prints (or stops) batch by
//! batch instead of holding the whole result; what the query spilled is counted when the
//! stream ends, fails or is dropped. A query whose device fails before its first row is
//! run again on the CPU underneath (`device_rerun`).

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;
use oxidelake_core::{EngineError, TelemetryHub};

use super::device_rerun::{CpuReplan, DeviceRerunStream};
use super::{SessionMode, SpillSummary};
use crate::memory::SpillAccount;

/// The running result of one statement.
///
/// When an embedded read-only query placed on a device fails there (a launch, a copy, a
/// kernel fault, device memory running out) before its first row, it is planned and run
/// again on the CPU placement and its batches come out in place of the error
/// ([`Self::reran_on_cpu`]; a warning names the device error and
/// `TelemetryHub::device_query_reruns` counts it). After the first row has been
/// emitted, a device error is returned as it comes: the rows delivered cannot be
/// taken back.
pub struct QueryStream {
    schema: SchemaRef,
    inner: DeviceRerunStream,
    /// The executing plan, whose metrics hold its spills (`None` for answers computed
    /// without one: plain EXPLAIN, CACHE TABLE). After a rerun on the CPU, the plan that
    /// failed on the device (what it spilled counts all the same).
    plan: Option<Arc<dyn ExecutionPlan>>,
    spills: SpillAccount,
    /// What the CPU run of a rerun spilled.
    cpu_spills: SpillAccount,
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
    /// A stream over an executing plan, run again on the CPU through `rerun` if it
    /// fails on its device before its first row (`None`: never).
    pub(super) fn running(
        plan: Arc<dyn ExecutionPlan>,
        inner: SendableRecordBatchStream,
        rerun: Option<CpuReplan>,
        mode: SessionMode,
    ) -> Self {
        Self {
            schema: inner.schema(),
            inner: DeviceRerunStream::new(inner, rerun, TelemetryHub::global()),
            plan: Some(plan),
            spills: SpillAccount::default(),
            cpu_spills: SpillAccount::default(),
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
            inner: DeviceRerunStream::new(Box::pin(inner), None, TelemetryHub::global()),
            plan: None,
            spills: SpillAccount::default(),
            cpu_spills: SpillAccount::default(),
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
    /// After a rerun on the CPU, the CPU run's plan.
    pub fn plan(&self) -> Option<&Arc<dyn ExecutionPlan>> {
        self.inner.cpu_plan().or(self.plan.as_ref())
    }

    /// Whether the batches come from a rerun on the CPU placement after the query
    /// failed on its device before its first row (see [`QueryStream`]).
    pub fn reran_on_cpu(&self) -> bool {
        self.inner.reran_on_cpu()
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

    /// What the query has spilled to disk so far (all of it once the stream ended;
    /// after a rerun on the CPU, both runs').
    pub fn spills(&mut self) -> SpillSummary {
        self.observe_spills();
        let (first, rerun) = (&self.spills, &self.cpu_spills);
        SpillSummary {
            files: first.files() + rerun.files(),
            bytes: first.bytes() + rerun.bytes(),
            held_in_host_bytes: first.held_in_host_bytes().max(rerun.held_in_host_bytes()),
        }
    }

    fn observe_spills(&mut self) {
        let hub = TelemetryHub::global();
        if let Some(plan) = &self.plan {
            self.spills.observe(plan, &hub);
        }
        if let Some(plan) = self.inner.cpu_plan() {
            self.cpu_spills.observe(plan, &hub);
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
