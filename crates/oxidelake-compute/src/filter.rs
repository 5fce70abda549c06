//! `GpuFilterExec`: fused filter + projection.

mod batches;

use std::fmt;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::filter::{FilterExec, FilterExecBuilder};
use datafusion::physical_plan::filter_pushdown::{FilterDescription, FilterPushdownPhase};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::projection::{EmbeddedProjection, ProjectionExec};
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PlanProperties, Statistics, StatisticsArgs,
    statistics::ChildStats,
};
use oxidelake_core::BackendKind;
use oxidelake_device::ops::{Predicate, check_predicates};

use crate::exec_support::{
    BackendChoice, ExecBackend, nothing_passes_before_optimisation, single_child,
};
use crate::gathering::coalesce_small;
use crate::placement_label;
use crate::predicate_expr::conjunction_expr;
use crate::segment::{host_items, host_stream};

/// Keeps the rows where every predicate is true, and outputs the projected columns.
/// Equivalent to `FilterExec(a AND b ...)` with a projection, but the dropped columns are
/// never filtered or copied.
///
/// Its plan properties (partitioning, equivalences, orderings, constants) are those of
/// the stock `FilterExec` with the same predicate and projection, computed by building
/// that node: the operator keeps its input's row order on every backend (the device
/// compaction is order-preserving), so it may claim what FilterExec claims, and claiming
/// less would make DataFusion insert sorts or reject the plan (`SanityCheckPlan`).
#[derive(Debug)]
pub struct GpuFilterExec {
    input: Arc<dyn ExecutionPlan>,
    predicates: Vec<Predicate>,
    projection: Vec<usize>,
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuFilterExec {
    /// A filter over `input`, placed (for EXPLAIN) on `placement`. Fails with
    /// `Unsupported` for predicates outside the covered types.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        predicates: Vec<Predicate>,
        projection: Vec<usize>,
        placement: BackendKind,
    ) -> Result<Self> {
        let input_schema = input.schema();
        check_predicates(&input_schema, &predicates).map_err(DataFusionError::from)?;
        let stock = FilterExecBuilder::new(
            conjunction_expr(&predicates, &input_schema)?,
            Arc::clone(&input),
        )
        .apply_projection(Some(projection.clone()))?
        .build()?;
        let schema = stock.schema();
        let properties = stock.properties().as_ref().clone();
        Ok(Self {
            input,
            predicates,
            projection,
            placement,
            backend: BackendChoice::Detect,
            schema,
            properties: Arc::new(properties),
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

    /// The conjunction of predicates.
    pub fn predicates(&self) -> &[Predicate] {
        &self.predicates
    }

    /// The projected input columns.
    pub fn projection(&self) -> &[usize] {
        &self.projection
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }

    /// The stock filter this one stands for.
    fn stock(&self) -> Result<FilterExec> {
        FilterExecBuilder::new(
            conjunction_expr(&self.predicates, &self.input.schema())?,
            Arc::clone(&self.input),
        )
        .apply_projection(Some(self.projection.clone()))?
        .build()
    }

    fn predicate_text(&self) -> String {
        let input_schema = self.input.schema();
        let text: Vec<String> = self
            .predicates
            .iter()
            .map(|p| p.display(&input_schema))
            .collect();
        if text.is_empty() {
            "true".into()
        } else {
            text.join(" AND ")
        }
    }
}

impl DisplayAs for GpuFilterExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let input_schema = self.input.schema();
        let projection: Vec<String> = self
            .projection
            .iter()
            .map(|i| {
                format!(
                    "{}@{i}",
                    input_schema
                        .fields()
                        .get(*i)
                        .map(|f| f.name().as_str())
                        .unwrap_or("?")
                )
            })
            .collect();
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "{}: predicate={}, projection=[{}]",
                placement_label("GpuFilterExec", self.placement),
                self.predicate_text(),
                projection.join(", ")
            ),
            DisplayFormatType::TreeRender => write!(
                f,
                "placement={}\npredicate={}",
                self.placement,
                self.predicate_text()
            ),
        }
    }
}

impl EmbeddedProjection for GpuFilterExec {
    /// `projection` indexes the current output; it is composed with the filter's own.
    fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        let composed = match projection {
            None => self.projection.clone(),
            Some(then) => crate::embedded_projection::compose(Some(&self.projection), &then)
                .ok_or_else(|| {
                    DataFusionError::Internal(format!(
                        "projection {then:?} beyond the filter's {} columns",
                        self.projection.len()
                    ))
                })?,
        };
        Ok(GpuFilterExec::try_new(
            Arc::clone(&self.input),
            self.predicates.clone(),
            composed,
            self.placement,
        )?
        .with_backend(self.backend.clone()))
    }
}

impl ExecutionPlan for GpuFilterExec {
    crate::exec_support::operator_basics!("GpuFilterExec");

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![true]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        // Predicates are plain (column, op, literal) values, not PhysicalExprs.
        Ok(TreeNodeRecursion::Continue)
    }

    /// After optimisation, as the stock filter: the filters a parent hands down (a hash
    /// join's dynamic filter) pass through to the input, so they reach the scan below
    /// (and `JoinFilterExec` above it). Before it, nothing passes: the planned predicate
    /// stays this node's own.
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
        let exec = GpuFilterExec::try_new(
            single_child(children, "GpuFilterExec")?,
            self.predicates.clone(),
            self.projection.clone(),
            self.placement,
        )?
        .with_backend(self.backend.clone());
        Ok(Arc::new(exec))
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        crate::embedded_projection::try_embed(projection, self)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // The one batch function over the input's host batches (gathered to a device's
        // batch size); what a selective predicate keeps of each is merged into fuller
        // batches, as the stock filter does (see `coalesce_small`).
        let exec = ExecBackend::for_task(&self.backend, self.placement, context.session_config())?;
        let batch_size = context.session_config().batch_size();
        let input = host_items(
            self.input.execute(partition, context)?,
            exec.backend.batching(),
        );
        let filtered = self.filtered(partition, exec, input);
        Ok(coalesce_small(
            host_stream(filtered, Arc::clone(&self.schema)),
            batch_size,
        ))
    }
}
