//! `GpuProjectionExec`: a projection whose computed columns are arithmetic, evaluated by
//! the backend's `eval_values` programs (or the same expressions vectorised on the CPU).
//!
//! It stands where DataFusion planned a `ProjectionExec`, most often the one computing
//! aggregate arguments (`l_extendedprice * (1 - l_discount)`) below a device partial
//! aggregate, and it keeps the stock node's expressions: they give its plan properties
//! (the stock node is built and asked), they travel in Ballista plans, EXPLAIN prints
//! them, and they compute a batch whose decimal values outgrow the device's 64-bit
//! images (DataFusion computes decimals in 128 bits), so every batch gets DataFusion's
//! answer.
//!
//! Between device transitions (ADR-0014) it takes and gives device batches: the backend
//! computes the columns on the device batch (`GpuBackend::evaluate`), and a batch it
//! refuses (a constant output, an operand held as 16-byte decimals) or whose values
//! outgrow 64 bits is copied back once and goes on by the host path (see `batches`).

mod batches;

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, Literal};
use datafusion::physical_expr::scalar_subquery::ScalarSubqueryExpr;
use datafusion::physical_plan::filter_pushdown::{FilterDescription, FilterPushdownPhase};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::{ProjectionExec, ProjectionExpr};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::ops::{HostEvaluateArgs, ProjectedColumn, ValueColumn, is_overflow};

use crate::exec_support::{
    BackendChoice, ExecBackend, OperatorMetrics, nothing_passes_before_optimisation, single_child,
};
use crate::placement_label;
use crate::segment::{host_items, host_stream};
use crate::value_expr::value_column;

/// Where one output column comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    /// An input column, passed through.
    Input(usize),
    /// The `i`-th computed column.
    Computed(usize),
    /// A constant (a literal, or a scalar subquery's value, known once the subquery
    /// has run): DataFusion's scalar, repeated; nothing to compute.
    Constant,
}

/// Whether `expr` is the same value on every row: a literal or a scalar subquery.
pub fn is_constant(expr: &Arc<dyn PhysicalExpr>) -> bool {
    expr.is::<Literal>() || expr.is::<ScalarSubqueryExpr>()
}

/// What a projection computes, shared by its host and resident paths.
#[derive(Debug, Clone)]
struct Projection {
    exprs: Vec<ProjectionExpr>,
    outputs: Vec<Output>,
    computed: Vec<ValueColumn>,
    schema: SchemaRef,
}

impl Projection {
    /// The output of `batch` on the host, and the bytes it moved: the computed columns by
    /// the backend when `device` (DataFusion's expressions where a value outgrows the
    /// backend's 64 bits), by DataFusion otherwise.
    fn project(
        &self,
        exec: &ExecBackend,
        metrics: &OperatorMetrics,
        batch: &RecordBatch,
        device: bool,
    ) -> Result<(RecordBatch, usize)> {
        let args = HostEvaluateArgs {
            batch,
            columns: &self.computed,
        };
        let values = if self.computed.is_empty() {
            Vec::new()
        } else {
            // An overflow is not the device's failure: every backend computes decimals
            // in 64 bits, so the batch goes to DataFusion's 128-bit expressions.
            // On the device: the batch and an 8-byte value per row and computed column.
            let state =
                || batch.get_array_memory_size() + 8 * batch.num_rows() * args.columns.len();
            let claim = device.then(|| exec.claim_call(metrics, state)).flatten();
            let on_device = match claim {
                Some(_claim) => {
                    exec.run_on_device(metrics, |backend, stream| {
                        match oxidelake_device::edge::evaluate(backend, stream, args) {
                            Err(e) if is_overflow(&e) => Ok(None),
                            other => other.map(Some),
                        }
                    })?
                    .flatten()
                }
                None => None,
            };
            match on_device {
                Some(values) => values,
                None => {
                    metrics.cpu_fallback_batches.add(1);
                    stock_columns(&self.exprs, &self.outputs, batch)?
                }
            }
        };
        let out = self.assemble(batch, &values)?;
        let moved = exec.bytes_moved(|| {
            values
                .iter()
                .map(|v| v.get_array_memory_size())
                .sum::<usize>()
                + batch.get_array_memory_size()
        });
        Ok((out, moved))
    }

    /// The output of `batch` with the computed columns `values`.
    fn assemble(&self, batch: &RecordBatch, values: &[ArrayRef]) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = self
            .outputs
            .iter()
            .zip(&self.exprs)
            .map(|(o, e)| match o {
                Output::Input(i) => Ok(Arc::clone(batch.column(*i))),
                Output::Computed(i) => Ok(Arc::clone(&values[*i])),
                Output::Constant => e.expr.evaluate(batch)?.into_array(batch.num_rows()),
            })
            .collect::<Result<_>>()?;
        let options = RecordBatchOptions::new().with_row_count(Some(batch.num_rows()));
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            columns,
            &options,
        )?)
    }

    /// The output of `batch` by DataFusion's own expressions (a replay's: no device).
    fn on_cpu(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let values = stock_columns(&self.exprs, &self.outputs, batch)?;
        self.assemble(batch, &values)
    }

    /// The outputs as the device computes them, or `None` when one is a constant (which
    /// the host path evaluates).
    fn device_outputs(&self) -> Option<Vec<ProjectedColumn>> {
        self.outputs
            .iter()
            .map(|o| match o {
                Output::Input(i) => Some(ProjectedColumn::Input(*i)),
                Output::Computed(k) => Some(ProjectedColumn::Computed(*k)),
                Output::Constant => None,
            })
            .collect()
    }
}

/// A projection that computes its arithmetic columns on the placed backend.
#[derive(Debug)]
pub struct GpuProjectionExec {
    input: Arc<dyn ExecutionPlan>,
    projection: Projection,
    placement: BackendKind,
    backend: BackendChoice,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuProjectionExec {
    /// The projection `exprs` over `input`, placed (for EXPLAIN) on `placement`. Fails
    /// with `Unsupported` naming the first expression that is neither a column, a
    /// literal nor covered arithmetic, or when nothing is computed (a projection of
    /// columns and literals has no work for a device).
    pub fn try_new(
        exprs: Vec<ProjectionExpr>,
        input: Arc<dyn ExecutionPlan>,
        placement: BackendKind,
    ) -> Result<Self> {
        let stock = ProjectionExec::try_new(exprs.clone(), Arc::clone(&input))?;
        let input_schema = input.schema();
        let mut outputs = Vec::with_capacity(exprs.len());
        let mut computed = Vec::new();
        for e in &exprs {
            if let Some(c) = e.expr.downcast_ref::<Column>() {
                outputs.push(Output::Input(c.index()));
                continue;
            }
            if is_constant(&e.expr) {
                outputs.push(Output::Constant);
                continue;
            }
            let column = value_column(&e.expr, &input_schema).map_err(|reason| {
                DataFusionError::from(EngineError::unsupported("GpuProjectionExec", reason))
            })?;
            outputs.push(Output::Computed(computed.len()));
            computed.push(column);
        }
        // A constant alone is work for a filter above (a comparison with a scalar
        // subquery's value), not for a projection on its own (`is_constant`).
        if computed.is_empty() && !outputs.contains(&Output::Constant) {
            return Err(DataFusionError::from(EngineError::unsupported(
                "GpuProjectionExec",
                "nothing to compute",
            )));
        }
        Ok(Self {
            input,
            projection: Projection {
                exprs,
                outputs,
                computed,
                schema: stock.schema(),
            },
            placement,
            backend: BackendChoice::Detect,
            properties: Arc::clone(stock.properties()),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// Runs on `backend` instead of asking the hardware detector at execute time.
    pub fn with_backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The input plan.
    pub fn input(&self) -> &Arc<dyn ExecutionPlan> {
        &self.input
    }

    /// The projection expressions, as DataFusion planned them.
    pub fn exprs(&self) -> &[ProjectionExpr] {
        &self.projection.exprs
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }

    /// The stock projection this one stands for.
    fn stock(&self) -> Result<ProjectionExec> {
        ProjectionExec::try_new(self.projection.exprs.clone(), Arc::clone(&self.input))
    }

    /// Whether the backend computes any column (one that only repeats constants for a
    /// filter above, a scalar subquery's value, does not).
    pub fn computes_on_device(&self) -> bool {
        !self.projection.computed.is_empty()
    }

    fn expr_text(&self) -> String {
        let parts: Vec<String> = self
            .projection
            .exprs
            .iter()
            .map(|p| {
                let e = p.expr.to_string();
                if e == p.alias {
                    e
                } else {
                    format!("{e} as {}", p.alias)
                }
            })
            .collect();
        parts.join(", ")
    }
}

impl DisplayAs for GpuProjectionExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "{}: expr=[{}]",
                placement_label("GpuProjectionExec", self.placement),
                self.expr_text()
            ),
            DisplayFormatType::TreeRender => {
                write!(f, "placement={}\nexpr={}", self.placement, self.expr_text())
            }
        }
    }
}

impl ExecutionPlan for GpuProjectionExec {
    crate::exec_support::operator_basics!("GpuProjectionExec");

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        // The rows keep their order, and the plan properties (the stock node's) say what
        // ordering that gives in output columns. `true` here would let DataFusion's sort
        // pushdown hand a sort requirement to the input with the *output's* column
        // indices (it remaps them only for its own ProjectionExec), sorting by the wrong
        // column: DataFusion's sqllogictest `window.slt:6864` and
        // `push_down_filter_parquet.slt:186` failed that way.
        vec![false]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        // As ProjectionExec with a computed expression (there always is one here): the
        // work spreads over the partitions a round-robin repartition below makes.
        vec![true]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        let mut recursion = TreeNodeRecursion::Continue;
        for e in &self.projection.exprs {
            recursion = f(&e.expr)?;
            if recursion == TreeNodeRecursion::Stop {
                break;
            }
        }
        Ok(recursion)
    }

    /// After optimisation, as the stock projection: the filters a parent hands down (a
    /// hash join's dynamic filter) pass through to the input where they read columns the
    /// projection passes on, so they reach the scan below. Before it, nothing passes.
    fn gather_filters_for_pushdown(
        &self,
        phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        if let Some(none) =
            nothing_passes_before_optimisation(phase, &parent_filters, &self.children())
        {
            return Ok(none);
        }
        self.stock()?
            .gather_filters_for_pushdown(phase, parent_filters, config)
    }

    crate::exec_support::stock_estimates!(1);

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let exec = GpuProjectionExec::try_new(
            self.projection.exprs.clone(),
            single_child(children, "GpuProjectionExec")?,
            self.placement,
        )?
        .with_backend(self.backend.clone());
        Ok(Arc::new(exec))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // The one batch function over the input's host batches, gathered to a device's
        // batch size.
        let exec = ExecBackend::for_task(&self.backend, self.placement, context.session_config())?;
        let input = host_items(
            self.input.execute(partition, context)?,
            exec.backend.batching(),
        );
        let projected = self.projected(partition, exec, input);
        Ok(host_stream(projected, Arc::clone(&self.projection.schema)))
    }
}

/// The computed columns of `batch` by DataFusion's own expressions.
fn stock_columns(
    exprs: &[ProjectionExpr],
    outputs: &[Output],
    batch: &RecordBatch,
) -> Result<Vec<ArrayRef>> {
    exprs
        .iter()
        .zip(outputs)
        .filter(|(_, o)| matches!(o, Output::Computed(_)))
        .map(|(e, _)| e.expr.evaluate(batch)?.into_array(batch.num_rows()))
        .collect()
}
