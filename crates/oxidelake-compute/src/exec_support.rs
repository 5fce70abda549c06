//! What the four operators share: choosing a backend at execute time, falling back to
//! the CPU per batch, and reporting to DataFusion metrics and the telemetry hub.
//!
//! A batch the device refuses (`Unsupported`) or fails (a driver error, out of memory,
//! a kernel that did not compile or load) completes on the CPU path, counted in the
//! `cpu_fallback_batches` metric (and `device_errors` for failures, with a `tracing`
//! warning); after a failure the rest of that execution stays on the CPU. Errors in the
//! input itself still fail the query, typed.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::metrics::{
    BaselineMetrics, Count, ExecutionPlanMetricsSet, MetricBuilder,
};
use oxidelake_core::{BackendKind, EngineError, OperatorTelemetry, TelemetryHub};
use oxidelake_device::{CpuBackend, DeviceMemory, DeviceStream, GpuBackend, HardwareDetector};

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

impl BackendChoice {
    /// The backend an operator placed on `placement` runs on, and whether the detector
    /// chose it: the choice's, except that an operator placed for the CPU
    /// (`oxidelake.placement.cpu_operators`) runs its CPU path wherever the detector
    /// would find a GPU.
    pub(crate) fn for_placement(&self, placement: BackendKind) -> (Arc<dyn GpuBackend>, bool) {
        match (self, placement) {
            (BackendChoice::Detect, BackendKind::CpuSimd) => (Arc::new(CpuBackend::new()), false),
            _ => (self.resolve(), matches!(self, BackendChoice::Detect)),
        }
    }
}

/// A backend, its stream, and the CPU reference to fall back to.
pub(crate) struct ExecBackend {
    pub(crate) backend: Arc<dyn GpuBackend>,
    pub(crate) stream: DeviceStream,
    pub(crate) cpu: CpuBackend,
    pub(crate) cpu_stream: DeviceStream,
    /// Set after the device failed (not merely refused) a batch: the rest of this
    /// execution runs on the CPU, since a failed device (a sticky CUDA error, a lost
    /// context, memory exhausted) would fail every later batch the same way.
    degraded: AtomicBool,
    /// Whether the backend is the detector's answer (not one fixed by the caller).
    detected: bool,
    /// The limit this execution's device state claims under (`device_budget`); `None`:
    /// nothing is claimed.
    device_limit: Option<usize>,
}

/// Why a device did not run a batch, if the CPU may run it instead.
fn fallback_reason(err: &EngineError) -> Option<&'static str> {
    match err {
        EngineError::Unsupported { .. } => Some("unsupported on the device"),
        EngineError::Device { .. } => Some("device error"),
        EngineError::OutOfMemory { .. } => Some("device out of memory"),
        EngineError::KernelCompile { .. } => Some("kernel did not compile or load"),
        EngineError::BackendUnavailable { .. } => Some("device unavailable"),
        _ => None,
    }
}

impl ExecBackend {
    /// The backend for an operator placed on `placement` ([`BackendChoice::for_placement`]).
    pub(crate) fn new(choice: &BackendChoice, placement: BackendKind) -> Result<Self> {
        let (backend, detected) = choice.for_placement(placement);
        Self::on(backend, detected)
    }

    /// On `backend`, which the detector chose when `detected` (a resident stream's, whose
    /// batches only that backend can read).
    pub(crate) fn on(backend: Arc<dyn GpuBackend>, detected: bool) -> Result<Self> {
        let stream = backend.create_stream().map_err(DataFusionError::from)?;
        let cpu = CpuBackend::new();
        let cpu_stream = cpu.create_stream().map_err(DataFusionError::from)?;
        Ok(Self {
            backend,
            stream,
            cpu,
            cpu_stream,
            degraded: AtomicBool::new(false),
            detected,
            device_limit: None,
        })
    }

    /// The backend an operator placed on `placement` runs a task on, its device state
    /// claimed under the task's session limit (see [`Self::limited_by`]).
    pub(crate) fn for_task(
        choice: &BackendChoice,
        placement: BackendKind,
        config: &datafusion::prelude::SessionConfig,
    ) -> Result<Self> {
        Ok(Self::new(choice, placement)?.limited_by(config))
    }

    /// This backend with its device state claimed from the process's device budget under
    /// the session's `oxidelake.memory.device_limit` in `config`, or a share of the
    /// device's memory where the session sets none. On the CPU backend nothing is
    /// claimed: its "device" state is host memory, which the host pool accounts.
    pub(crate) fn limited_by(mut self, config: &datafusion::prelude::SessionConfig) -> Self {
        if self.kind() != BackendKind::CpuSimd {
            self.device_limit =
                crate::device_limit_for(crate::session_device_limit(config), self.backend.as_ref());
        }
        self
    }

    /// The limit device state claims under (see [`Self::limited_by`]).
    pub(crate) fn device_limit(&self) -> Option<usize> {
        self.device_limit
    }

    /// Claims `bytes` of device state from the budget: `Some(claim)` (empty where
    /// nothing is claimed), or `None` when the budget refuses them.
    pub(crate) fn claim_device(&self, bytes: usize) -> Option<crate::DeviceClaim> {
        let mut claim = crate::DeviceBudget::global().claim();
        match self.device_limit {
            Some(limit) => claim.try_grow(bytes, limit).then_some(claim),
            None => Some(claim),
        }
    }

    /// Marks the device failed: the rest of this execution runs on the CPU.
    pub(crate) fn degrade(&self) {
        self.degraded.store(true, Ordering::Relaxed);
    }

    /// Whether the device failed earlier in this execution.
    pub(crate) fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    /// Whether the backend is the detector's answer.
    pub(crate) fn detected(&self) -> bool {
        self.detected
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

    /// Runs `op` on the device; `Ok(None)` when the device refused it (`Unsupported`) or
    /// failed at it (a device error, out of memory, a kernel that did not load), which is
    /// counted in `cpu_fallback_batches` (and `device_errors` for a failure, with a
    /// warning): the caller then runs its CPU path. Other errors (bad input) propagate.
    pub(crate) fn run_on_device<T>(
        &self,
        metrics: &OperatorMetrics,
        op: impl FnOnce(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
    ) -> Result<Option<T>> {
        if self.kind() == BackendKind::CpuSimd {
            if metrics.no_device {
                // Placed for a GPU, running where there is none: every batch is the
                // CPU path's, and EXPLAIN ANALYZE and the dashboard say so.
                metrics.cpu_fallback_batches.add(1);
            }
            return op(self.backend.as_ref(), &self.stream)
                .map(Some)
                .map_err(DataFusionError::from);
        }
        if self.degraded.load(Ordering::Relaxed) {
            metrics.cpu_fallback_batches.add(1);
            return Ok(None);
        }
        match op(self.backend.as_ref(), &self.stream) {
            Ok(value) => Ok(Some(value)),
            Err(err) => match fallback_reason(&err) {
                Some(reason) => {
                    if matches!(err, EngineError::Unsupported { .. }) {
                        tracing::debug!(error = %err, "batch falls back to the CPU");
                    } else {
                        tracing::warn!(
                            error = %err,
                            reason,
                            "device failed a batch; it and the rest of this execution run on the CPU"
                        );
                        self.degraded.store(true, Ordering::Relaxed);
                        metrics.device_errors.add(1);
                    }
                    metrics.cpu_fallback_batches.add(1);
                    Ok(None)
                }
                None => Err(DataFusionError::from(err)),
            },
        }
    }

    /// Claims the device state of one call (an estimate, `bytes`, computed only where a
    /// limit applies) for as long as the returned claim lives; `None` when the budget
    /// refuses it, counted in `device_budget_cpu_batches`: the caller then runs the batch
    /// on the CPU (and counts it in `cpu_fallback_batches`).
    pub(crate) fn claim_call(
        &self,
        metrics: &OperatorMetrics,
        bytes: impl FnOnce() -> usize,
    ) -> Option<crate::DeviceClaim> {
        let claim = match self.device_limit {
            None => Some(crate::DeviceBudget::global().claim()),
            Some(_) => self.claim_device(bytes()),
        };
        if claim.is_none() {
            metrics.device_budget_cpu_batches.add(1);
        }
        claim
    }

    /// [`Self::run`] with the call's device state (an estimate, `bytes`) claimed from the
    /// device budget for its duration ([`Self::claim_call`]): past the budget the batch
    /// runs on the CPU reference.
    pub(crate) fn run_within_budget<T>(
        &self,
        metrics: &OperatorMetrics,
        bytes: impl FnOnce() -> usize,
        op: impl Fn(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
    ) -> Result<T> {
        match self.claim_call(metrics, bytes) {
            Some(_claim) => self.run(metrics, op),
            None => {
                metrics.cpu_fallback_batches.add(1);
                op(&self.cpu, &self.cpu_stream).map_err(DataFusionError::from)
            }
        }
    }

    /// Runs `op` on the chosen backend and, where [`Self::run_on_device`] falls back,
    /// on the CPU reference (for operations whose inputs and outputs are host data).
    pub(crate) fn run<T>(
        &self,
        metrics: &OperatorMetrics,
        op: impl Fn(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
    ) -> Result<T> {
        match self.run_on_device(metrics, &op)? {
            Some(value) => Ok(value),
            None => op(&self.cpu, &self.cpu_stream).map_err(DataFusionError::from),
        }
    }
}

/// The statistics of a unary operator that hands on its input's rows: all of them
/// (`Exact`: the input's statistics as they are) or some of them (`UpperBound`: the
/// input's, inexact). Unknown where the input's were not asked for.
pub(crate) fn rows_of_input(
    input_stats: &[Arc<datafusion::physical_plan::Statistics>],
    schema: &arrow::datatypes::SchemaRef,
    kept: RowsKept,
) -> Arc<datafusion::physical_plan::Statistics> {
    match (input_stats.first(), kept) {
        (Some(input), RowsKept::All) => Arc::clone(input),
        (Some(input), RowsKept::Some) => Arc::new(input.as_ref().clone().to_inexact()),
        (None, _) => Arc::new(datafusion::physical_plan::Statistics::new_unknown(schema)),
    }
}

/// The estimates of an operator with `$children` inputs that estimates as the stock node
/// it stands for (its `stock()`, over the same inputs and expressions): the placement
/// rule and DataFusion's later rules read estimates of plans that already hold GPU
/// operators. Where the stock node cannot be built, no child statistics are asked for.
macro_rules! stock_estimates {
    ($children:literal) => {
        fn statistics_from_inputs(
            &self,
            input_stats: &[Arc<Statistics>],
            args: &StatisticsArgs,
        ) -> Result<Arc<Statistics>> {
            self.stock()?.statistics_from_inputs(input_stats, args)
        }

        fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
            match self.stock() {
                Ok(stock) => stock.child_stats_requests(partition),
                Err(_) => vec![ChildStats::Skip; $children],
            }
        }
    };
}
pub(crate) use stock_estimates;

/// Which of its input's rows a unary operator hands on (see [`rows_of_input`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum RowsKept {
    All,
    Some,
}

/// Before optimisation's end (`FilterPushdownPhase::Pre`) a GPU operator lets no parent
/// filter through: the predicates planned above it stay where they are. `None` in the
/// later phase, where the operator answers as the stock node it stands for.
pub(crate) fn nothing_passes_before_optimisation(
    phase: datafusion::physical_plan::filter_pushdown::FilterPushdownPhase,
    parent_filters: &[Arc<dyn datafusion::physical_expr::PhysicalExpr>],
    children: &[&Arc<dyn datafusion::physical_plan::ExecutionPlan>],
) -> Option<datafusion::physical_plan::filter_pushdown::FilterDescription> {
    (phase == datafusion::physical_plan::filter_pushdown::FilterPushdownPhase::Pre).then(|| {
        datafusion::physical_plan::filter_pushdown::FilterDescription::all_unsupported(
            parent_filters,
            children,
        )
    })
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
    /// Batches the device failed (not merely refused) before the CPU ran them.
    pub(crate) device_errors: Count,
    /// Batches the CPU ran because the device budget refused their device state.
    pub(crate) device_budget_cpu_batches: Count,
    /// Device batches the backend refused in place (a type or size its kernels do not
    /// take): copied back once and run by the operator's host path (`crate::segment`).
    pub(crate) refused_batches: Count,
    /// Placed for a GPU but executing where the detector found none (the `no_device`
    /// metric is 1 per such partition).
    pub(crate) no_device: bool,
    pub(crate) telemetry: Arc<OperatorTelemetry>,
}

impl OperatorMetrics {
    /// The metrics of one partition of an operator placed on `placement`, executing on
    /// `exec`'s backend.
    pub(crate) fn new(
        set: &ExecutionPlanMetricsSet,
        partition: usize,
        name: &str,
        placement: BackendKind,
        exec: &ExecBackend,
    ) -> Self {
        // A caller that fixed the CPU backend asked for it; only the detector finding no
        // GPU for a GPU placement is a fallback.
        let no_device = exec.detected
            && placement != BackendKind::CpuSimd
            && exec.kind() == BackendKind::CpuSimd;
        let no_device_count = MetricBuilder::new(set).counter("no_device", partition);
        if no_device {
            no_device_count.add(1);
        }
        Self {
            baseline: BaselineMetrics::new(set, partition),
            rows_in: MetricBuilder::new(set).counter("rows_in", partition),
            bytes_moved: MetricBuilder::new(set).counter("bytes_moved", partition),
            cpu_fallback_batches: MetricBuilder::new(set)
                .counter("cpu_fallback_batches", partition),
            device_errors: MetricBuilder::new(set).counter("device_errors", partition),
            device_budget_cpu_batches: MetricBuilder::new(set)
                .counter("device_budget_cpu_batches", partition),
            refused_batches: MetricBuilder::new(set).counter("refused_batches", partition),
            no_device,
            // The hub is told where the operator runs, not where it was placed.
            telemetry: TelemetryHub::global().register_operator(name, exec.kind()),
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

/// The three `ExecutionPlan` methods every operator of this crate answers alike from
/// its fields, written once: its name, its `properties` (computed at construction, as
/// DataFusion's operators keep theirs) and its `metrics`.
macro_rules! operator_basics {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn properties(&self) -> &Arc<PlanProperties> {
            &self.properties
        }

        fn metrics(&self) -> Option<MetricsSet> {
            Some(self.metrics.clone_inner())
        }
    };
}
pub(crate) use operator_basics;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_backend_runs_an_operator_whatever_it_was_placed_for() {
        let fixed = BackendChoice::Fixed(Arc::new(CpuBackend::new()));
        for placement in [BackendKind::CpuSimd, BackendKind::Cuda] {
            let exec = ExecBackend::new(&fixed, placement).unwrap();
            assert_eq!(exec.kind(), BackendKind::CpuSimd);
            assert!(!exec.detected());
        }
    }

    #[test]
    #[ignore = "needs a CUDA device (or the emulated driver): scripts/test-cuda-emulated.sh"]
    fn an_operator_placed_for_the_cpu_runs_on_the_cpu_backend_where_a_gpu_is_detected() {
        let gpu = HardwareDetector::shared().unwrap();
        assert_ne!(gpu.kind(), BackendKind::CpuSimd, "no GPU backend detected");
        let cpu = ExecBackend::new(&BackendChoice::Detect, BackendKind::CpuSimd).unwrap();
        assert_eq!(cpu.kind(), BackendKind::CpuSimd);
        assert!(!cpu.detected(), "a CPU placement is not a fallback");
        let placed = ExecBackend::new(&BackendChoice::Detect, gpu.kind()).unwrap();
        assert_eq!(placed.kind(), gpu.kind());
        assert!(placed.detected());
    }
}
