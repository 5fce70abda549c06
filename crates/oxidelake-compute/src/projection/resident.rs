//! `GpuProjectionExec` inside a device segment ([`crate::segment`]).

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{Count, MetricBuilder};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::DeviceBatch;
use oxidelake_device::ops::{EvaluateArgs, ProjectedColumn, is_overflow};

use super::{GpuProjectionExec, Projection};
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::replay::{Replay, bridge, replay_below, resident_input};
use crate::segment::{ResidentExec, ResidentStream, SegmentBatch, each_batch};

/// What one partition's projection of segment batches needs.
struct Projecting {
    exec: ExecBackend,
    metrics: OperatorMetrics,
    bridged: Count,
    input: Arc<dyn ExecutionPlan>,
    projection: Projection,
    /// The outputs as the device computes them (`None`: a constant, host path only).
    outputs: Option<Vec<ProjectedColumn>>,
}

impl Projecting {
    /// One segment batch projected: a device batch on the device (bridged through the
    /// host where the device refuses it or its values outgrow 64 bits), a host batch on
    /// the host; a device batch the device fails is replayed on the CPU.
    fn project(&self, item: SegmentBatch) -> Result<SegmentBatch> {
        let started = Instant::now();
        let (batch, origin) = match item {
            SegmentBatch::Host(host) => {
                // On the CPU backend its own path; on a device, a host batch is one
                // replayed below after a device failure, and stays on the CPU.
                let cpu_backend = self.exec.kind() == BackendKind::CpuSimd;
                let (out, moved) =
                    self.projection
                        .project(&self.exec, &self.metrics, &host, cpu_backend)?;
                self.metrics
                    .record(host.num_rows(), out.num_rows(), started, moved);
                return Ok(SegmentBatch::Host(out));
            }
            SegmentBatch::Device { batch, origin } => (batch, origin),
        };
        let replay = Replay {
            input: &self.input,
            exec: &self.exec,
            metrics: &self.metrics,
            operator: "GpuProjectionExec",
        };
        let replayed = match replay.device_or_replayed(&batch, origin.as_deref(), |batch| {
            self.on_device(batch, started)
        })? {
            Ok(out) => return Ok(SegmentBatch::Device { batch: out, origin }),
            Err(host) => host,
        };
        let out = self.projection.on_cpu(&replayed)?;
        self.metrics
            .record(replayed.num_rows(), out.num_rows(), started, 0);
        Ok(SegmentBatch::Host(out))
    }

    /// `batch`'s columns computed on the device into a device batch, or bridged through
    /// the host where the backend refuses it or a value outgrows 64 bits.
    fn on_device(&self, batch: &DeviceBatch, started: Instant) -> Result<DeviceBatch> {
        let exec = &self.exec;
        let mut device = true;
        if let Some(outputs) = self.outputs.as_ref() {
            let args = EvaluateArgs {
                batch,
                columns: &self.projection.computed,
                outputs,
                schema: &self.projection.schema,
            };
            match exec.backend.evaluate(&exec.stream, args) {
                Ok(out) => {
                    // Read back: the overflow flag.
                    let moved = exec.bytes_moved(|| 4);
                    self.metrics
                        .record(batch.num_rows(), out.num_rows(), started, moved);
                    return Ok(out);
                }
                Err(err) if is_overflow(&err) => device = false,
                Err(EngineError::Unsupported { .. }) => {}
                Err(err) => return Err(DataFusionError::from(err)),
            }
        }
        bridge(exec, &self.metrics, &self.bridged, batch, started, |host| {
            self.projection.project(exec, &self.metrics, host, device)
        })
    }
}

impl ResidentExec for GpuProjectionExec {
    /// Computes its columns on its input's segment batches: device batches on the device
    /// where the backend can (`GpuBackend::evaluate`), others
    /// *bridged* (copied to the host, projected by the host path, copied back:
    /// `bridged_batches`); a batch whose values outgrow 64 bits on the device is bridged
    /// to DataFusion's expressions (`cpu_fallback_batches` counts it too); host batches
    /// on the host. A batch the device fails is replayed on the CPU from its origin
    /// ([`crate::segment`]).
    fn execute_resident(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<ResidentStream> {
        let input = resident_input(&self.input, "GpuProjectionExec", partition, context)?;
        let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?;
        let metrics = OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuProjectionExec",
            self.placement,
            &exec,
        );
        let projecting = Projecting {
            exec,
            metrics,
            bridged: MetricBuilder::new(&self.metrics).counter("bridged_batches", partition),
            input: Arc::clone(&self.input),
            outputs: self.projection.resident_outputs(),
            projection: self.projection.clone(),
        };
        let batches = each_batch(input.batches, input.backend.as_ref(), move |item| {
            projecting.project(item)
        });
        Ok(ResidentStream {
            backend: input.backend,
            detected: input.detected,
            batches,
        })
    }

    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch> {
        let host = replay_below(&self.input, origin)?;
        self.projection.on_cpu(&host)
    }
}
