//! Where a plan's data changes device (ADR-0014): `HostToDeviceExec` copies its input's
//! batches to the device once, the GPU operators above it pass [`SegmentBatch`]es to
//! each other, and `DeviceToHostExec` copies them back once, where the next operator runs
//! on the CPU (the segment and its replay on a device failure: [`crate::segment`]).
//!
//! Between the two, batches travel through [`ResidentExec::execute_resident`] rather than
//! `ExecutionPlan::execute`; DataFusion sees ordinary nodes with their input's schema.
//! A `HostToDeviceExec` uploads one batch ahead of its consumer, so a copy overlaps the
//! device work on the batch before it. Each transition stages its copies through a
//! [`StagingPool`] of its own per partition, so a run of similar batches allocates one
//! pinned staging buffer per batch in flight, not one per batch (`staging_allocations`
//! in EXPLAIN ANALYZE). On the CPU backend nothing is copied: the batches stay host
//! batches ([`SegmentBatch::Host`]) and each operator runs its host path.
//!
//! Every node's `execute` still returns host batches with the right rows (the
//! `HostToDeviceExec` passes its input through, a GPU operator runs its host path), so a
//! plan that some later rewrite separated from its transitions stays correct, only
//! slower.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, MetricBuilder, MetricsSet,
};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use futures::{Stream, StreamExt};
use oxidelake_core::BackendKind;
use oxidelake_device::GpuBackend;
use oxidelake_device::resident::{self, DeviceBatch, StagingPool};

use crate::device_batches::{coalesce_small, gather};
use crate::exec_support::{
    BackendChoice, ExecBackend, OperatorMetrics, RowsKept, rows_of_input, single_child,
};
use crate::placement_label;
use crate::segment::{SegmentBatch, recover, replay_if_degraded};

/// A stream of a segment's batches.
pub type SegmentBatches = Pin<Box<dyn Stream<Item = Result<SegmentBatch>> + Send>>;

/// Device batches of one partition, with the backend whose memory holds them.
pub struct ResidentStream {
    /// The backend that allocated the batches; consumers run on it.
    pub backend: Arc<dyn GpuBackend>,
    /// Whether the hardware detector chose that backend (for the `no_device` metric).
    pub detected: bool,
    /// The batches.
    pub batches: SegmentBatches,
}

impl fmt::Debug for ResidentStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResidentStream")
            .field("backend", &self.backend.kind())
            .finish()
    }
}

/// A node that can hand its output over as device batches.
pub trait ResidentExec {
    /// The output of `partition` as segment batches.
    fn execute_resident(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<ResidentStream>;

    /// The host batch this node hands on for the segment batch whose origin (the host
    /// batch its segment uploaded) is `origin`, computed by the CPU paths of this node
    /// and those below it in the segment ([`crate::segment`]).
    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch>;
}

/// `plan` as a [`ResidentExec`], when it produces device batches: a `HostToDeviceExec`,
/// a GPU filter or projection whose own input does, or a GPU join whose probe and build
/// inputs both do (`GpuHashJoinExec::gives_device_batches`).
pub fn as_resident(plan: &Arc<dyn ExecutionPlan>) -> Option<&dyn ResidentExec> {
    if let Some(h2d) = plan.downcast_ref::<HostToDeviceExec>() {
        return Some(h2d);
    }
    if let Some(filter) = plan.downcast_ref::<crate::GpuFilterExec>() {
        return as_resident(filter.input()).map(|_| filter as &dyn ResidentExec);
    }
    if let Some(projection) = plan.downcast_ref::<crate::GpuProjectionExec>() {
        return as_resident(projection.input()).map(|_| projection as &dyn ResidentExec);
    }
    if let Some(join) = plan.downcast_ref::<crate::GpuHashJoinExec>() {
        return join
            .gives_device_batches()
            .then_some(join as &dyn ResidentExec);
    }
    None
}

/// Idle staging buffers a transition keeps per partition (more than the batches in
/// flight at once).
const PARKED_STAGING: usize = 4;

/// Batches a `HostToDeviceExec` uploads ahead of the one its consumer works on, so the
/// next copy overlaps that work instead of waiting for it.
const UPLOADS_AHEAD: usize = 1;

/// Runs a resident operator's host path on `batch` (a *bridged* batch): copies it to the
/// host, runs `host_work` (its output and the bytes that work moved), copies the output
/// back, and records the batch in `metrics` and `bridged`.
pub(crate) fn bridge(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    bridged: &Count,
    batch: &DeviceBatch,
    started: Instant,
    host_work: impl FnOnce(&RecordBatch) -> Result<(RecordBatch, usize)>,
) -> Result<DeviceBatch> {
    let host = resident::download(exec.backend.as_ref(), &exec.stream, batch)?;
    let (out, moved) = host_work(&host)?;
    let back = resident::upload(exec.backend.as_ref(), &exec.stream, &out)?;
    bridged.add(1);
    let moved = moved + exec.bytes_moved(|| batch.bytes() + back.bytes());
    metrics.record(host.num_rows(), out.num_rows(), started, moved);
    Ok(back)
}

/// Copies and bytes of one transition, beside the operator metrics.
struct TransitionMetrics {
    operator: OperatorMetrics,
    copies: Count,
    /// Staging buffers allocated (the rest of the copies reused a parked one).
    staging_allocations: Count,
    /// The pool's allocation count already added to `staging_allocations` (copies run
    /// concurrently, so each reports the pool's growth since the last report).
    staging_reported: AtomicUsize,
}

impl TransitionMetrics {
    fn new(
        set: &ExecutionPlanMetricsSet,
        partition: usize,
        name: &str,
        placement: BackendKind,
        exec: &ExecBackend,
    ) -> Self {
        Self {
            operator: OperatorMetrics::new(set, partition, name, placement, exec),
            copies: MetricBuilder::new(set).counter("copies", partition),
            staging_allocations: MetricBuilder::new(set).counter("staging_allocations", partition),
            staging_reported: AtomicUsize::new(0),
        }
    }

    /// One batch copied through `pool`: `bytes` count as moved on a device, not on the
    /// CPU backend (whose "device" is host memory), as for every operator.
    fn record(
        &self,
        exec: &ExecBackend,
        rows: usize,
        started: Instant,
        bytes: usize,
        pool: &StagingPool,
    ) {
        self.copies.add(1);
        let allocated = pool.allocated();
        let reported = self
            .staging_reported
            .fetch_max(allocated, Ordering::Relaxed);
        self.staging_allocations
            .add(allocated.saturating_sub(reported));
        let moved = exec.bytes_moved(|| bytes);
        self.operator.record(rows, rows, started, moved);
    }
}

/// Runs `work` on tokio's blocking pool (a copy blocks until the device has it).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
}

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
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "{}", placement_label("HostToDeviceExec", self.placement))
            }
            DisplayFormatType::TreeRender => write!(f, "placement={}", self.placement),
        }
    }
}

impl ExecutionPlan for HostToDeviceExec {
    fn name(&self) -> &str {
        "HostToDeviceExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    /// The input's: a transition moves every row and changes none.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(rows_of_input(input_stats, &self.schema(), RowsKept::All))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // A transition moves batches; it evaluates no expression.
        Ok(TreeNodeRecursion::Continue)
    }

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

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}

impl ResidentExec for HostToDeviceExec {
    fn execute_resident(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<ResidentStream> {
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
                let rows = batch.num_rows();
                metrics.operator.record(rows, rows, Instant::now(), 0);
                Ok(SegmentBatch::Host(batch))
            });
            return Ok(ResidentStream {
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
        Ok(ResidentStream {
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
    let rows = batch.num_rows();
    if exec.is_degraded() {
        metrics.operator.cpu_fallback_batches.add(1);
        metrics.operator.record(rows, rows, started, 0);
        return SegmentBatch::Host(batch);
    }
    match resident::upload_with(exec.backend.as_ref(), &exec.stream, &batch, Some(pool)) {
        Ok(resident) => {
            metrics.record(exec, batch.num_rows(), started, resident.bytes(), pool);
            SegmentBatch::Device {
                batch: resident,
                origin: Some(Arc::new(batch)),
            }
        }
        Err(err) => {
            tracing::warn!(
                error = %err,
                "the device failed an upload; this batch and the rest of the partition stay on the host"
            );
            exec.degrade();
            metrics.operator.device_errors.add(1);
            metrics.operator.cpu_fallback_batches.add(1);
            metrics.operator.record(rows, rows, started, 0);
            SegmentBatch::Host(batch)
        }
    }
}

/// Copies device batches back to the host for the CPU operator above.
#[derive(Debug)]
pub struct DeviceToHostExec {
    input: Arc<dyn ExecutionPlan>,
    placement: BackendKind,
    metrics: ExecutionPlanMetricsSet,
}

impl DeviceToHostExec {
    /// The transition above `input` (a node producing device batches).
    pub fn new(input: Arc<dyn ExecutionPlan>, placement: BackendKind) -> Self {
        Self {
            input,
            placement,
            metrics: ExecutionPlanMetricsSet::new(),
        }
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

impl DisplayAs for DeviceToHostExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                write!(f, "{}", placement_label("DeviceToHostExec", self.placement))
            }
            DisplayFormatType::TreeRender => write!(f, "placement={}", self.placement),
        }
    }
}

impl ExecutionPlan for DeviceToHostExec {
    fn name(&self) -> &str {
        "DeviceToHostExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.input.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    /// The input's: a transition moves every row and changes none.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        Ok(rows_of_input(input_stats, &self.schema(), RowsKept::All))
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // A transition moves batches; it evaluates no expression.
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(DeviceToHostExec::new(
            single_child(children, "DeviceToHostExec")?,
            self.placement,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let schema = self.input.schema();
        let Some(resident) = as_resident(&self.input) else {
            // Separated from its device operators by a rewrite: its input is host data.
            return self.input.execute(partition, context);
        };
        let batch_size = context.session_config().batch_size();
        let ResidentStream {
            backend,
            detected,
            batches,
        } = resident.execute_resident(partition, context)?;
        let exec = Arc::new(ExecBackend::on(backend, detected)?);
        let metrics = Arc::new(TransitionMetrics::new(
            &self.metrics,
            partition,
            "DeviceToHostExec",
            self.placement,
            &exec,
        ));
        let pool = Arc::new(StagingPool::new(PARKED_STAGING));
        let input = Arc::clone(&self.input);
        let stream = batches.then(move |batch| {
            let (exec, metrics, pool, input) = (
                Arc::clone(&exec),
                Arc::clone(&metrics),
                Arc::clone(&pool),
                Arc::clone(&input),
            );
            async move {
                let (batch, origin) = match batch? {
                    SegmentBatch::Host(host) => {
                        let rows = host.num_rows();
                        metrics.operator.record(rows, rows, Instant::now(), 0);
                        return Ok(host);
                    }
                    SegmentBatch::Device { batch, origin } => (batch, origin),
                };
                blocking(move || {
                    let started = Instant::now();
                    let replayed =
                        replay_if_degraded(origin.as_deref(), &input, &exec, &metrics.operator);
                    let host = match replayed {
                        Some(host) => host?,
                        None => match resident::download_with(
                            exec.backend.as_ref(),
                            &exec.stream,
                            &batch,
                            Some(&pool),
                        ) {
                            Ok(host) => {
                                let rows = host.num_rows();
                                metrics.record(&exec, rows, started, batch.bytes(), &pool);
                                return Ok(host);
                            }
                            Err(err) => recover(
                                DataFusionError::from(err),
                                origin.as_deref(),
                                &input,
                                &exec,
                                &metrics.operator,
                                "DeviceToHostExec",
                            )?,
                        },
                    };
                    let rows = host.num_rows();
                    metrics.operator.record(rows, rows, started, 0);
                    Ok(host)
                })
                .await
            }
        });
        // A selective segment hands back small batches: they are merged, as a host
        // operator's output is (`coalesce_small`).
        Ok(coalesce_small(
            Box::pin(RecordBatchStreamAdapter::new(schema, stream)),
            batch_size,
        ))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
