//! `GpuFilterExec` inside a device segment ([`crate::segment`]).

use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::{Count, MetricBuilder};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::DeviceBatch;
use oxidelake_device::ops::{HostFilterArgs, Predicate};
use oxidelake_device::resident::ResidentValues;

use super::GpuFilterExec;
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::replay::{Replay, bridge, replay_below, resident_input};
use crate::segment::{
    ResidentExec, ResidentStream, SegmentBatch, coalesce_host_items, each_batch, on_cpu,
};

/// What one partition's filtering of segment batches needs.
struct Filtering {
    exec: ExecBackend,
    metrics: OperatorMetrics,
    bridged: Count,
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

    /// One segment batch filtered: a device batch on the device (bridged through the
    /// host where the device refuses it), a host batch on the host; a device batch the
    /// device fails is replayed on the CPU.
    fn filter(&self, item: SegmentBatch) -> Result<SegmentBatch> {
        let started = Instant::now();
        let (batch, origin) = match item {
            SegmentBatch::Host(host) => {
                // On the CPU backend its own path; on a device, a host batch is one
                // replayed below after a device failure, and stays on the CPU.
                let out = if self.exec.kind() == BackendKind::CpuSimd {
                    self.exec.run(&self.metrics, |backend, stream| {
                        oxidelake_device::edge::filter_project(backend, stream, self.args(&host))
                    })?
                } else {
                    self.metrics.cpu_fallback_batches.add(1);
                    on_cpu(|cpu, stream| {
                        oxidelake_device::edge::filter_project(cpu, stream, self.args(&host))
                    })?
                };
                self.metrics
                    .record(host.num_rows(), out.num_rows(), started, 0);
                return Ok(SegmentBatch::Host(out));
            }
            SegmentBatch::Device { batch, origin } => (batch, origin),
        };
        let replay = Replay {
            input: &self.input,
            exec: &self.exec,
            metrics: &self.metrics,
            operator: "GpuFilterExec",
        };
        let replayed = match replay.device_or_replayed(&batch, origin.as_deref(), |batch| {
            self.on_device(batch, started)
        })? {
            Ok(out) => return Ok(SegmentBatch::Device { batch: out, origin }),
            Err(host) => host,
        };
        let out = on_cpu(|cpu, stream| {
            oxidelake_device::edge::filter_project(cpu, stream, self.args(&replayed))
        })?;
        self.metrics
            .record(replayed.num_rows(), out.num_rows(), started, 0);
        Ok(SegmentBatch::Host(out))
    }

    /// `batch` filtered on the device into a device batch, or bridged through the host
    /// where the backend refuses it.
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
                        .filter(|c| matches!(c.values, ResidentValues::Strings { .. }))
                        .count()
                });
                let moved = exec.bytes_moved(|| 4 * (1 + strings));
                self.metrics
                    .record(batch.num_rows(), kept.num_rows(), started, moved);
                Ok(kept)
            }
            Err(EngineError::Unsupported { .. }) => {
                bridge(exec, &self.metrics, &self.bridged, batch, started, |host| {
                    let out = exec.run(&self.metrics, |backend, stream| {
                        oxidelake_device::edge::filter_project(backend, stream, self.args(host))
                    })?;
                    Ok((out, 0))
                })
            }
            Err(err) => Err(DataFusionError::from(err)),
        }
    }
}

impl ResidentExec for GpuFilterExec {
    /// Filters its input's segment batches: device batches on the device where the
    /// backend can (`GpuBackend::filter_project`), others
    /// *bridged* (copied to the host, filtered there through `oxidelake_device::edge`, copied back:
    /// `bridged_batches`); host batches on the host. A batch the device fails is
    /// replayed on the CPU from its origin ([`crate::segment`]).
    fn execute_resident(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<ResidentStream> {
        let batch_size = context.session_config().batch_size();
        let input = resident_input(&self.input, "GpuFilterExec", partition, context)?;
        let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?;
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
            bridged: MetricBuilder::new(&self.metrics).counter("bridged_batches", partition),
            input: Arc::clone(&self.input),
            predicates: self.predicates.clone(),
            projection: self.projection.clone(),
        };
        let batches = each_batch(input.batches, input.backend.as_ref(), move |item| {
            filtering.filter(item)
        });
        // What a selective predicate keeps of each host batch is merged into fuller
        // batches, as the host path does (`coalesce_small`).
        let batches = coalesce_host_items(
            batches,
            input.backend.kind(),
            Arc::clone(&self.schema),
            batch_size,
        );
        Ok(ResidentStream {
            backend: input.backend,
            detected: input.detected,
            batches,
        })
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
