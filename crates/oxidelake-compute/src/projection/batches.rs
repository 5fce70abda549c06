//! `GpuProjectionExec`'s one batch function, over segment batches in either form
//! ([`crate::segment`]), and the projection inside a device segment.

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::EngineError;
use oxidelake_device::DeviceBatch;
use oxidelake_device::ops::{EvaluateArgs, ProjectedColumn, is_overflow};

use super::{GpuProjectionExec, Projection};
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::replay::{Replay, continue_segment, refused, replay_below};
use crate::segment::{SegmentBatch, SegmentBatches, SegmentExec, SegmentStream, each_batch};

/// What one partition's projection needs.
struct Projecting {
    exec: ExecBackend,
    metrics: OperatorMetrics,
    input: Arc<dyn ExecutionPlan>,
    projection: Projection,
    /// The outputs as the device computes them (`None`: a constant, host path only).
    outputs: Option<Vec<ProjectedColumn>>,
}

impl Projecting {
    /// One segment batch projected: a device batch on the device (by the host path where
    /// the device refuses it or its values outgrow 64 bits), a host batch by the host
    /// path (on the CPU where the device failed it below); a device batch the device
    /// fails is replayed on the CPU.
    fn project(&self, item: SegmentBatch) -> Result<SegmentBatch> {
        let started = Instant::now();
        if let Some(host) = item.batch.as_host() {
            if item.cpu_only {
                self.metrics.cpu_fallback_batches.add(1);
                return Ok(SegmentBatch::cpu_only(self.on_cpu(host, started)?));
            }
            return Ok(SegmentBatch::host(self.on_host(host, started, 0, true)?));
        }
        let replay = Replay {
            input: &self.input,
            exec: &self.exec,
            metrics: &self.metrics,
            operator: "GpuProjectionExec",
        };
        match replay.device_or_replayed(&item.batch, item.origin.as_deref(), |batch| {
            self.on_device(batch, started)
        })? {
            Ok(out) => Ok(SegmentBatch::new(out, item.origin)),
            // The replay counted the batch as a CPU one already.
            Err(replayed) => Ok(SegmentBatch::cpu_only(self.on_cpu(&replayed, started)?)),
        }
    }

    /// `host` projected by DataFusion's expressions (a batch the device failed).
    fn on_cpu(&self, host: &RecordBatch, started: Instant) -> Result<RecordBatch> {
        let out = self.projection.on_cpu(host)?;
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, 0);
        Ok(out)
    }

    /// `host` projected by the host path (its computed columns by the backend where
    /// `device`, see [`Projection::project`]); `moved` counts the bytes that brought the
    /// batch to the host.
    fn on_host(
        &self,
        host: &RecordBatch,
        started: Instant,
        moved: usize,
        device: bool,
    ) -> Result<RecordBatch> {
        let (out, computed) = self
            .projection
            .project(&self.exec, &self.metrics, host, device)?;
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, moved + computed);
        Ok(out)
    }

    /// `batch`'s columns computed on the device into a device batch, or by the host path
    /// where the backend refuses it or a value outgrows 64 bits (then by DataFusion's
    /// 128-bit expressions).
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
        let (host, moved) = refused(exec, &self.metrics, batch)?;
        Ok(DeviceBatch::host(
            self.on_host(&host, started, moved, device)?,
        ))
    }
}

impl GpuProjectionExec {
    /// `batches` of `partition` projected one at a time on `exec`'s backend
    /// ([`Projecting::project`]).
    pub(super) fn projected(
        &self,
        partition: usize,
        exec: ExecBackend,
        batches: SegmentBatches,
    ) -> SegmentBatches {
        let backend = Arc::clone(&exec.backend);
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
            input: Arc::clone(&self.input),
            outputs: self.projection.device_outputs(),
            projection: self.projection.clone(),
        };
        each_batch(batches, backend.as_ref(), move |item| {
            projecting.project(item)
        })
    }
}

impl SegmentExec for GpuProjectionExec {
    /// Computes its columns on its input's segment batches ([`Projecting::project`]). A
    /// batch whose values outgrow 64 bits on the device goes to DataFusion's
    /// expressions (`cpu_fallback_batches` counts it too); a batch the device fails is
    /// replayed on the CPU from its origin ([`crate::segment`]).
    fn execute_segment(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SegmentStream> {
        continue_segment(
            &self.input,
            "GpuProjectionExec",
            partition,
            context,
            |exec, b| self.projected(partition, exec, b),
        )
    }

    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch> {
        let host = replay_below(&self.input, origin)?;
        self.projection.on_cpu(&host)
    }
}
