//! `HostToDeviceExec`: where a plan's batches cross to the device (see
//! [`crate::transition`]).

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::Result;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use futures::StreamExt;
use oxidelake_core::BackendKind;
use oxidelake_device::device_batch::{self, StagingPool};

use super::metrics::{PARKED_STAGING, TransitionMetrics};
use crate::exec_support::{BackendChoice, ExecBackend, RowsKept, rows_of_input, single_child};
use crate::gathering::gather;
use crate::segment::{SegmentBatch, SegmentExec, SegmentStream, blocking};

/// Batches a `HostToDeviceExec` uploads ahead of the one its consumer works on, so the
/// next copy overlaps that work instead of waiting for it.
const UPLOADS_AHEAD: usize = 1;

/// Copies its input's batches to the device, gathered to the device's batch size.
#[derive(Debug)]
pub struct HostToDeviceExec {
    input: Arc<dyn ExecutionPlan>,
    placement: BackendKind,
    backend: BackendChoice,
    metrics: ExecutionPlanMetricsSet,
}

impl HostToDeviceExec {
    /// The transition above `input`, for operators placed on `placement`.
    pub fn new(input: Arc<dyn ExecutionPlan>, placement: BackendKind) -> Self {
        Self {
            input,
            placement,
            backend: BackendChoice::Detect,
            metrics: ExecutionPlanMetricsSet::new(),
        }
    }

    /// Copies to `backend` instead of the detector's answer.
    pub fn with_backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The backend kind the operators beside it were placed for.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }
}

impl DisplayAs for HostToDeviceExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        super::fmt_transition("HostToDeviceExec", self.placement, t, f)
    }
}

impl ExecutionPlan for HostToDeviceExec {
    super::transition_plan_methods!("HostToDeviceExec");

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(
            HostToDeviceExec::new(single_child(children, "HostToDeviceExec")?, self.placement)
                .with_backend(self.backend.clone()),
        ))
    }

    /// A host consumer gets the input's batches unchanged.
    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        self.input.execute(partition, context)
    }
}

impl SegmentExec for HostToDeviceExec {
    fn execute_segment(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SegmentStream> {
        let input = self.input.execute(partition, context)?;
        let exec = ExecBackend::new(&self.backend, self.placement)?;
        let (backend, detected) = (Arc::clone(&exec.backend), exec.detected());
        let metrics = Arc::new(TransitionMetrics::new(
            &self.metrics,
            partition,
            "HostToDeviceExec",
            self.placement,
            &exec,
        ));
        if exec.kind() == BackendKind::CpuSimd {
            // The CPU backend's "device" is host memory: the batches stay where they are
            // (counted as rows through the node, without a copy).
            let batches = input.map(move |batch| {
                let batch = batch?;
                // Placed for a GPU where there is none: every batch stays on the CPU, and
                // EXPLAIN ANALYZE says so, as for every operator placed so.
                let no_device = metrics.operator.no_device;
                metrics.host_batch(batch.num_rows(), Instant::now(), no_device);
                Ok(SegmentBatch::host(batch))
            });
            return Ok(SegmentStream {
                backend,
                detected,
                batches: Box::pin(batches),
            });
        }
        let input = match exec.backend.batching() {
            Some(b) => gather(input, b.batch_rows, b.batch_bytes),
            None => input,
        };
        let exec = Arc::new(exec);
        let pool = Arc::new(StagingPool::new(PARKED_STAGING));
        // `buffered` starts the next batches' uploads (each on the blocking pool) while
        // the consumer still works on the one it was handed, and keeps their order.
        let batches = input.map(move |batch| {
            let (exec, metrics, pool) =
                (Arc::clone(&exec), Arc::clone(&metrics), Arc::clone(&pool));
            async move {
                let batch = batch?;
                blocking(move || Ok(upload_or_keep(&exec, &metrics, &pool, batch))).await
            }
        });
        let batches = batches.buffered(1 + UPLOADS_AHEAD);
        Ok(SegmentStream {
            backend,
            detected,
            batches: Box::pin(batches),
        })
    }

    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch> {
        Ok(origin.clone())
    }
}

/// `batch` on the device with itself as its origin; kept on the host where the device
/// failed the upload or an earlier one (counted and named in a warning, as every
/// device failure in a segment: [`crate::segment`]).
fn upload_or_keep(
    exec: &ExecBackend,
    metrics: &TransitionMetrics,
    pool: &StagingPool,
    batch: RecordBatch,
) -> SegmentBatch {
    let started = Instant::now();
    if exec.is_degraded() {
        metrics.host_batch(batch.num_rows(), started, true);
        return SegmentBatch::cpu_only(batch);
    }
    match device_batch::upload_with(exec.backend.as_ref(), &exec.stream, &batch, Some(pool)) {
        Ok(on_device) => {
            metrics.record(
                exec,
                batch.num_rows(),
                started,
                on_device.uploaded_bytes(),
                pool,
            );
            SegmentBatch::new(on_device, Some(Arc::new(batch)))
        }
        Err(err) => {
            tracing::warn!(
                error = %err,
                "the device failed an upload; this batch and the rest of the partition stay on the host"
            );
            exec.degrade();
            metrics.operator.device_errors.add(1);
            metrics.host_batch(batch.num_rows(), started, true);
            SegmentBatch::cpu_only(batch)
        }
    }
}
