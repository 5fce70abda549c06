//! What the four operators share: choosing a backend at execute time, falling back to
//! the CPU per batch, and reporting to DataFusion metrics and the telemetry hub.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};
use oxidelake_core::{BackendKind, EngineError, OperatorTelemetry, TelemetryHub};
use oxidelake_device::{CpuBackend, DeviceStream, GpuBackend, HardwareDetector};

/// How an operator finds its backend.
#[derive(Debug, Clone, Default)]
pub enum BackendChoice {
    /// Ask the local `HardwareDetector` when the operator executes (the default): the
    /// same plan then runs on a GPU executor's GPU and on a CPU executor's CPU.
    #[default]
    Detect,
    /// Use this backend (tests, benchmarks, embedding applications).
    Fixed(Arc<dyn GpuBackend>),
}

impl BackendChoice {
    /// The backend for this execution. When `OXIDE_BACKEND` names a backend this machine
    /// lacks, the operator warns and runs on what the machine has: a plan placed for a
    /// GPU cluster must still complete on an executor without one.
    pub fn resolve(&self) -> Arc<dyn GpuBackend> {
        match self {
            BackendChoice::Fixed(b) => Arc::clone(b),
            BackendChoice::Detect => match HardwareDetector::shared() {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(error = %e, "requested backend unavailable on this executor; auto-detecting");
                    HardwareDetector::new(None)
                        .backend()
                        .unwrap_or_else(|_| Arc::new(CpuBackend::new()))
                }
            },
        }
    }
}

/// A backend, its stream, and the CPU reference to fall back to.
pub(crate) struct ExecBackend {
    pub(crate) backend: Arc<dyn GpuBackend>,
    pub(crate) stream: DeviceStream,
    pub(crate) cpu: CpuBackend,
    pub(crate) cpu_stream: DeviceStream,
}

impl ExecBackend {
    pub(crate) fn new(choice: &BackendChoice) -> Result<Self> {
        let backend = choice.resolve();
        let stream = backend.create_stream().map_err(DataFusionError::from)?;
        let cpu = CpuBackend::new();
        let cpu_stream = cpu.create_stream().map_err(DataFusionError::from)?;
        Ok(Self {
            backend,
            stream,
            cpu,
            cpu_stream,
        })
    }

    pub(crate) fn kind(&self) -> BackendKind {
        self.backend.kind()
    }

    /// Bytes a batch moved between host and device: `bytes` on a GPU, 0 on the CPU.
    pub(crate) fn bytes_moved(&self, bytes: impl FnOnce() -> usize) -> usize {
        if self.kind() == BackendKind::CpuSimd {
            0
        } else {
            bytes()
        }
    }

    /// Runs `op` on the chosen backend; if it answers `Unsupported`, runs it on the CPU
    /// and counts the fallback.
    pub(crate) fn run<T>(
        &self,
        metrics: &OperatorMetrics,
        op: impl Fn(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
    ) -> Result<T> {
        match op(self.backend.as_ref(), &self.stream) {
            Err(EngineError::Unsupported { feature, detail })
                if self.kind() != BackendKind::CpuSimd =>
            {
                tracing::debug!(%feature, %detail, "batch falls back to the CPU");
                metrics.cpu_fallback_batches.add(1);
                op(&self.cpu, &self.cpu_stream).map_err(DataFusionError::from)
            }
            other => other.map_err(DataFusionError::from),
        }
    }
}

/// The only child of a unary operator being rebuilt by `with_new_children`.
pub(crate) fn single_child(
    mut children: Vec<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>>,
    operator: &str,
) -> Result<std::sync::Arc<dyn datafusion::physical_plan::ExecutionPlan>> {
    if children.len() != 1 {
        return Err(DataFusionError::Internal(format!(
            "{operator} takes 1 child, got {}",
            children.len()
        )));
    }
    Ok(children.swap_remove(0))
}

/// DataFusion metrics (shown by EXPLAIN ANALYZE) plus the telemetry handle.
pub(crate) struct OperatorMetrics {
    pub(crate) baseline: BaselineMetrics,
    pub(crate) rows_in: Count,
    pub(crate) bytes_moved: Count,
    pub(crate) cpu_fallback_batches: Count,
    pub(crate) telemetry: Arc<OperatorTelemetry>,
}

impl OperatorMetrics {
    pub(crate) fn new(
        set: &ExecutionPlanMetricsSet,
        partition: usize,
        name: &str,
        placement: BackendKind,
    ) -> Self {
        Self {
            baseline: BaselineMetrics::new(set, partition),
            rows_in: MetricBuilder::new(set).counter("rows_in", partition),
            bytes_moved: MetricBuilder::new(set).counter("bytes_moved", partition),
            cpu_fallback_batches: MetricBuilder::new(set)
                .counter("cpu_fallback_batches", partition),
            telemetry: TelemetryHub::global().register_operator(name, placement),
        }
    }

    /// Records one batch in both places.
    pub(crate) fn record(
        &self,
        rows_in: usize,
        rows_out: usize,
        started: Instant,
        bytes_moved: usize,
    ) {
        let elapsed: Duration = started.elapsed();
        self.rows_in.add(rows_in);
        self.bytes_moved.add(bytes_moved);
        self.baseline.elapsed_compute().add_duration(elapsed);
        self.baseline.record_output(rows_out);
        self.baseline.output_batches().add(1);
        self.telemetry
            .record_batch(rows_in as u64, rows_out as u64, elapsed, bytes_moved as u64);
    }
}
