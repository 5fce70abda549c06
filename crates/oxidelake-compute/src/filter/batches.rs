//! `GpuFilterExec`'s one batch function, over segment batches in either form
//! ([`crate::segment`]), and the filter inside a device segment.

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use oxidelake_core::EngineError;
use oxidelake_device::DeviceBatch;
use oxidelake_device::device_batch::ValueLayout;
use oxidelake_device::ops::{HostFilterArgs, Predicate};

use super::GpuFilterExec;
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::replay::{Replay, continue_segment, refused, replay_below};
use crate::segment::{
    SegmentBatch, SegmentBatches, SegmentExec, SegmentStream, coalesce_host_items, each_batch,
    on_cpu,
};

/// What one partition's filtering needs.
struct Filtering {
    exec: ExecBackend,
    metrics: OperatorMetrics,
    input: Arc<dyn ExecutionPlan>,
    predicates: Vec<Predicate>,
    projection: Vec<usize>,
}

impl Filtering {
    fn args<'a>(&'a self, batch: &'a RecordBatch) -> HostFilterArgs<'a> {
        HostFilterArgs {
            batch,
            predicates: &self.predicates,
            projection: &self.projection,
        }
    }

    /// One segment batch filtered: a device batch on the device (through the host path
    /// where the device refuses it), a host batch by the host path (on the CPU where the
    /// device failed it below); a device batch the device fails is replayed on the CPU.
    fn filter(&self, item: SegmentBatch) -> Result<SegmentBatch> {
        let started = Instant::now();
        if let Some(host) = item.batch.as_host() {
            if item.cpu_only {
                self.metrics.cpu_fallback_batches.add(1);
                return Ok(SegmentBatch::cpu_only(self.on_cpu(host, started)?));
            }
            return Ok(SegmentBatch::host(self.on_host(host, started, 0)?));
        }
        let replay = Replay {
            input: &self.input,
            exec: &self.exec,
            metrics: &self.metrics,
            operator: "GpuFilterExec",
        };
        match replay.device_or_replayed(&item.batch, item.origin.as_deref(), |batch| {
            self.on_device(batch, started)
        })? {
            Ok(out) => Ok(SegmentBatch::new(out, item.origin)),
            // The replay counted the batch as a CPU one already.
            Err(replayed) => Ok(SegmentBatch::cpu_only(self.on_cpu(&replayed, started)?)),
        }
    }

    /// `host` filtered on the CPU (a batch the device failed).
    fn on_cpu(&self, host: &RecordBatch, started: Instant) -> Result<RecordBatch> {
        let out = on_cpu(|cpu, stream| {
            oxidelake_device::edge::filter_project(cpu, stream, self.args(host))
        })?;
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, 0);
        Ok(out)
    }

    /// `host` filtered by the host path: the backend through `oxidelake_device::edge`
    /// (on a device only the predicate columns cross), the CPU where the device refuses
    /// or fails it or the device budget has no room; `moved` counts the bytes that
    /// brought the batch to the host.
    fn on_host(&self, host: &RecordBatch, started: Instant, moved: usize) -> Result<RecordBatch> {
        // On the device: the batch and what it keeps (at most as much again).
        let state = || 2 * host.get_array_memory_size();
        let out = self
            .exec
            .run_within_budget(&self.metrics, state, |backend, stream| {
                oxidelake_device::edge::filter_project(backend, stream, self.args(host))
            })?;
        let moved = moved
            + self
                .exec
                .bytes_moved(|| host.get_array_memory_size() + out.get_array_memory_size());
        self.metrics
            .record(host.num_rows(), out.num_rows(), started, moved);
        Ok(out)
    }

    /// `batch` filtered on the device into a device batch, or by the host path where
    /// the backend refuses it.
    fn on_device(&self, batch: &DeviceBatch, started: Instant) -> Result<DeviceBatch> {
        let exec = &self.exec;
        match exec
            .backend
            .filter_project(&exec.stream, batch, &self.predicates, &self.projection)
        {
            Ok(kept) => {
                // Read back: the kept count and each string column's byte total (the
                // program's small uploads are not counted).
                let strings = kept.on_device().map_or(0, |on| {
                    on.columns()
                        .iter()
                        .filter(|c| matches!(c.values, ValueLayout::Strings { .. }))
                        .count()
                });
                let moved = exec.bytes_moved(|| 4 * (1 + strings));
                self.metrics
                    .record(batch.num_rows(), kept.num_rows(), started, moved);
                Ok(kept)
            }
            Err(EngineError::Unsupported { .. }) => {
                let (host, moved) = refused(exec, &self.metrics, batch)?;
                Ok(DeviceBatch::host(self.on_host(&host, started, moved)?))
            }
            Err(err) => Err(DataFusionError::from(err)),
        }
    }
}

impl GpuFilterExec {
    /// `batches` of `partition` filtered one at a time on `exec`'s backend
    /// ([`Filtering::filter`]).
    pub(super) fn filtered(
        &self,
        partition: usize,
        exec: ExecBackend,
        batches: SegmentBatches,
    ) -> SegmentBatches {
        let backend = Arc::clone(&exec.backend);
        let metrics = OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuFilterExec",
            self.placement,
            &exec,
        );
        let filtering = Filtering {
            exec,
            metrics,
            input: Arc::clone(&self.input),
            predicates: self.predicates.clone(),
            projection: self.projection.clone(),
        };
        each_batch(batches, backend.as_ref(), move |item| {
            filtering.filter(item)
        })
    }
}

impl SegmentExec for GpuFilterExec {
    /// Filters its input's segment batches ([`Filtering::filter`]). A batch the device
    /// fails is replayed on the CPU from its origin ([`crate::segment`]).
    fn execute_segment(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SegmentStream> {
        let batch_size = context.session_config().batch_size();
        let mut stream = continue_segment(
            &self.input,
            "GpuFilterExec",
            partition,
            context,
            |exec, b| self.filtered(partition, exec, b),
        )?;
        // What a selective predicate keeps of each host batch is merged into fuller
        // batches, as a host consumer's stream is (`coalesce_small`).
        stream.batches = coalesce_host_items(
            stream.batches,
            stream.backend.kind(),
            Arc::clone(&self.schema),
            batch_size,
        );
        Ok(stream)
    }

    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch> {
        let host = replay_below(&self.input, origin)?;
        on_cpu(|cpu, stream| {
            oxidelake_device::edge::filter_project(
                cpu,
                stream,
                HostFilterArgs {
                    batch: &host,
                    predicates: &self.predicates,
                    projection: &self.projection,
                },
            )
        })
    }
}
