//! How a segment's operators find the device batches below them, and how a batch the
//! device fails is replayed on the CPU (see [`crate::segment`]).

use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::device_batch::{self, DeviceBatch};

use super::{SegmentBatches, SegmentExec, SegmentStream, host_items};
use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics};
use crate::transition::upload::HostToDeviceExec;

/// `plan` as a [`SegmentExec`], when it produces device batches: a `HostToDeviceExec`,
/// a GPU filter or projection whose own input does, or a GPU join whose probe and build
/// inputs both do (`GpuHashJoinExec::gives_device_batches`).
pub fn as_segment(plan: &Arc<dyn ExecutionPlan>) -> Option<&dyn SegmentExec> {
    if let Some(h2d) = plan.downcast_ref::<HostToDeviceExec>() {
        return Some(h2d);
    }
    if let Some(filter) = plan.downcast_ref::<crate::GpuFilterExec>() {
        return as_segment(filter.input()).map(|_| filter as &dyn SegmentExec);
    }
    if let Some(projection) = plan.downcast_ref::<crate::GpuProjectionExec>() {
        return as_segment(projection.input()).map(|_| projection as &dyn SegmentExec);
    }
    if let Some(join) = plan.downcast_ref::<crate::GpuHashJoinExec>() {
        return join
            .gives_device_batches()
            .then_some(join as &dyn SegmentExec);
    }
    None
}

/// The segment batches of `partition` that `input` hands on to `operator` (a node the
/// transition rule placed above a node that hands on device batches).
pub(crate) fn segment_input(
    input: &Arc<dyn ExecutionPlan>,
    operator: &str,
    partition: usize,
    context: Arc<TaskContext>,
) -> Result<SegmentStream> {
    as_segment(input)
        .ok_or_else(|| {
            DataFusionError::Internal(format!("{operator}'s input holds no device batches"))
        })?
        .execute_segment(partition, context)
}

/// The segment stream of an operator that hands on segment batches (a filter, a
/// computed projection): `input`'s segment batches of `partition` through `run`, the
/// operator's batch function over them on the backend they live on (with the session's
/// device limit).
pub(crate) fn continue_segment(
    input: &Arc<dyn ExecutionPlan>,
    operator: &str,
    partition: usize,
    context: Arc<TaskContext>,
    run: impl FnOnce(ExecBackend, SegmentBatches) -> SegmentBatches,
) -> Result<SegmentStream> {
    let config = context.session_config().clone();
    let input = segment_input(input, operator, partition, context)?;
    let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?.limited_by(&config);
    Ok(SegmentStream {
        batches: run(exec, input.batches),
        backend: input.backend,
        detected: input.detected,
    })
}

/// The batches of `partition` an operator that brings its output back to the host (the
/// partial aggregate) works on: the segment batches its `input` hands on where it does,
/// otherwise `input`'s host batches as they come ([`host_items`], not gathered) on the
/// backend `choice` gives an operator placed on `placement`.
pub(crate) fn input_batches(
    input: &Arc<dyn ExecutionPlan>,
    (choice, placement): (&BackendChoice, BackendKind),
    partition: usize,
    context: Arc<TaskContext>,
) -> Result<SegmentStream> {
    if let Some(segment) = as_segment(input) {
        return segment.execute_segment(partition, context);
    }
    let (backend, detected) = choice.for_placement(placement);
    Ok(SegmentStream {
        batches: host_items(input.execute(partition, context)?, None),
        backend,
        detected,
    })
}

/// The host copy of `batch`, a device batch the backend refused in place: copied back
/// once, counted in `refused_batches`, and run by the operator's host path from there
/// (it stays on the host for the rest of its segment). Returns the copy and the bytes
/// that crossed.
pub(crate) fn refused(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    batch: &DeviceBatch,
) -> Result<(RecordBatch, usize)> {
    let host = device_batch::download(exec.backend.as_ref(), &exec.stream, batch)?;
    metrics.refused_batches.add(1);
    Ok((host, exec.bytes_moved(|| batch.bytes())))
}

/// Whether `err`, from an operator's device work on a batch, is the device failing (so
/// a replay on the CPU keeps the answer) rather than a fault of the input or the plan:
/// the one classification the engine uses ([`EngineError::is_device_failure_in`]), so
/// a batch is replayed exactly where the session would otherwise re-run the query.
pub(crate) fn is_device_failure(err: &DataFusionError) -> bool {
    EngineError::is_device_failure_in(err)
}

/// The host form of the batch whose origin is `origin`, as `input` (a node handing on
/// segment batches) would have handed it on: its operators' CPU paths over the origin.
pub(crate) fn replay_below(
    input: &Arc<dyn ExecutionPlan>,
    origin: &RecordBatch,
) -> Result<RecordBatch> {
    as_segment(input)
        .ok_or_else(|| {
            DataFusionError::Internal(format!(
                "{} hands on no device batches to replay",
                input.name()
            ))
        })?
        .replay(origin)
}

/// After `err` from `operator`'s device work on a batch of `input`'s with `origin`: the
/// input's host form of that batch (replayed on the CPU), counted as a device failure
/// and a CPU batch in `metrics` and named in a warning, with `exec` degraded; `err`
/// itself where it is no device failure or the batch has no origin.
pub(crate) fn recover(
    err: DataFusionError,
    origin: Option<&RecordBatch>,
    input: &Arc<dyn ExecutionPlan>,
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    operator: &str,
) -> Result<RecordBatch> {
    let Some(origin) = origin.filter(|_| is_device_failure(&err)) else {
        return Err(err);
    };
    tracing::warn!(
        error = %err,
        operator,
        "the device failed a batch of a device segment; it is replayed on the CPU and the \
         rest of this operator's execution runs there"
    );
    exec.degrade();
    metrics.device_errors.add(1);
    metrics.cpu_fallback_batches.add(1);
    replay_below(input, origin)
}

/// A batch whose device work `exec` should skip: its backend failed earlier in this
/// execution and the batch can be replayed, so it is replayed on the CPU straight away
/// (counted in `cpu_fallback_batches`); `None` to try the device.
pub(crate) fn replay_if_degraded(
    origin: Option<&RecordBatch>,
    input: &Arc<dyn ExecutionPlan>,
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
) -> Option<Result<RecordBatch>> {
    let origin = origin.filter(|_| exec.is_degraded())?;
    metrics.cpu_fallback_batches.add(1);
    Some(replay_below(input, origin))
}

/// What an operator of a segment needs to run a batch on the device or, where the
/// device fails it, replay it on the CPU.
pub(crate) struct Replay<'a> {
    /// The node handing on the operator's batches.
    pub(crate) input: &'a Arc<dyn ExecutionPlan>,
    /// The operator's backend (degraded after a failure).
    pub(crate) exec: &'a ExecBackend,
    /// The operator's metrics (a failure and a replayed batch are counted there).
    pub(crate) metrics: &'a OperatorMetrics,
    /// The operator's name, for the warning.
    pub(crate) operator: &'static str,
}

impl Replay<'_> {
    /// `on_device`'s output for `batch` (`Ok(Ok(_))`), or the host batch the operator's
    /// CPU path takes instead (`Ok(Err(_))`): the input's host form of the batch,
    /// replayed on the CPU from `origin` after the device failed it (or failed earlier in
    /// this execution). Errors that are no device failure, and failures of batches
    /// without an origin, propagate.
    pub(crate) fn device_or_replayed<T>(
        &self,
        batch: &DeviceBatch,
        origin: Option<&RecordBatch>,
        on_device: impl FnOnce(&DeviceBatch) -> Result<T>,
    ) -> Result<std::result::Result<T, RecordBatch>> {
        if let Some(host) = replay_if_degraded(origin, self.input, self.exec, self.metrics) {
            return Ok(Err(host?));
        }
        match on_device(batch) {
            Ok(out) => Ok(Ok(out)),
            Err(err) => Ok(Err(recover(
                err,
                origin,
                self.input,
                self.exec,
                self.metrics,
                self.operator,
            )?)),
        }
    }
}
