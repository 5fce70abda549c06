//! `GpuPartialAggregateExec`: the partial half of a grouped aggregation on the device.
//!
//! DataFusion splits `GROUP BY` aggregation into a partial aggregate per input partition,
//! a hash repartition on the keys, and a final aggregate that merges the partial states.
//! This operator replaces the partial half only, and produces exactly the state columns
//! the replaced node declared (SUM's sum and, for OxideLake's checked `sum`, its wrap
//! count; COUNT's count; AVG's count and sum, ...), so the stock final aggregate above it
//! merges them, applies HAVING-free finishing (AVG's division, decimal result types) and
//! spills under memory pressure as it always does.
//!
//! Why the partial half: it is where the rows are (a scan's worth per partition in, one
//! row per group and batch out), it is a per-batch map with no state between batches, so
//! it keeps its input's partitioning and runs in every partition and every Ballista task
//! in parallel, and its results are exact to merge. The final merge sees a few rows per
//! group and stays on the CPU, where DataFusion's accumulators define the semantics.
//!
//! Per batch, one plan (see `batches`): the backend's grouped SUM / COUNT / MIN / MAX
//! over the key columns where they lie and the arguments' 8-byte images (an integer or
//! decimal SUM by the two 32-bit halves of its images, which cannot overflow), whose
//! results are turned into the partial state types. On the host, a batch first gets the
//! casts DataFusion's coercion put on an argument and, for a decimal SUM whose values
//! leave 64 bits, three limbs per value, appended as columns (`spec`). The halves' and
//! limbs' sums are joined exactly in i128 (`limbs`). OxideLake's checked `sum` gets its
//! state as its own accumulators make it, the sum wrapped into the state type and how
//! many times it wrapped (`crate::checked_sum`), so a group's sum that leaves the state
//! type is carried exactly to the final aggregate, where only the total can overflow.
//! DataFusion's `sum` and `avg` get the wrapped sum, as their wrapping additions make it.
//! A float key's groups come back with `-0.0` keyed `+0.0`, as DataFusion keys them, so
//! the final merge sees one key where it would merge two.
//!
//! When grouping does not reduce (about as many groups as rows over a partition's first
//! rows, by DataFusion's own skip settings), later rows pass through as their own state
//! rows without device work, as stock DataFusion's partial aggregate does (see
//! `pass_through`).
//!
//! Where the input hands on device batches (ADR-0014), the aggregate reads them where
//! they lie and only its result comes back to the host (see `batches`); EXPLAIN says
//! `input=device`.

mod batches;
mod from_plan;
mod limbs;
mod pass_through;
mod spec;

use std::fmt;
use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::row::{RowConverter, SortField};
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::filter_pushdown::{
    ChildFilterDescription, FilterDescription, FilterPushdownPhase,
};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, ExecutionPlanProperties, Partitioning,
    PlanProperties, Statistics, StatisticsArgs, statistics::ChildStats,
};
use oxidelake_core::{BackendKind, EngineError};

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics, single_child};
use crate::placement_label;
use crate::segment::each_batch;
use crate::segment::replay::{as_segment, input_batches};

use limbs::limb_states;
pub use spec::{AggInput, MAX_DEVICE_DECIMAL_PRECISION, PartialAggSpec, PartialFunc};

/// The partial half of a grouped aggregation (see the module docs). Output: the key
/// columns, then each aggregate's state columns, as the given schema names them.
#[derive(Debug)]
pub struct GpuPartialAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    aggregates: Vec<PartialAggSpec>,
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GpuPartialAggregateExec {
    /// Groups `input` by the columns `keys` and computes `aggregates`' partial states,
    /// producing `schema` (the replaced partial aggregate's output schema). Fails with
    /// `Unsupported` for key or value types outside the device coverage, and with a
    /// plan error when `schema` does not have the state types DataFusion uses.
    pub fn try_new(
        input: Arc<dyn ExecutionPlan>,
        keys: Vec<usize>,
        aggregates: Vec<PartialAggSpec>,
        schema: SchemaRef,
        placement: BackendKind,
    ) -> Result<Self> {
        let input_schema = input.schema();
        let unsupported = |detail: String| -> DataFusionError {
            EngineError::unsupported("GpuPartialAggregateExec", detail).into()
        };
        check_keys(&input_schema, &keys).map_err(unsupported)?;
        let states: usize = aggregates.iter().map(|a| a.func.state_columns()).sum();
        if schema.fields().len() != keys.len() + states {
            return Err(DataFusionError::Plan(format!(
                "GpuPartialAggregateExec: {} output fields for {} keys and {states} states",
                schema.fields().len(),
                keys.len()
            )));
        }
        for (i, k) in keys.iter().enumerate() {
            let (ours, theirs) = (
                input_schema.field(*k).data_type(),
                schema.field(i).data_type(),
            );
            if ours != theirs {
                return Err(DataFusionError::Plan(format!(
                    "GpuPartialAggregateExec: key {i} is {ours}, the output says {theirs}"
                )));
            }
        }
        let mut at = keys.len();
        for spec in &aggregates {
            let value = match &spec.input {
                Some(input) => {
                    let field = input_schema.fields().get(input.column).ok_or_else(|| {
                        DataFusionError::Plan(format!(
                            "aggregate column {} out of range",
                            input.column
                        ))
                    })?;
                    Some(
                        input
                            .cast
                            .clone()
                            .unwrap_or_else(|| field.data_type().clone()),
                    )
                }
                None => None,
            };
            let n = spec.func.state_columns();
            let state_types: Vec<&DataType> = schema.fields()[at..at + n]
                .iter()
                .map(|f| f.data_type())
                .collect();
            // COUNT takes any argument: only its validity is read.
            let value_for_check = if spec.func == PartialFunc::Count {
                None
            } else {
                value.as_ref()
            };
            spec::check_state_types(spec.func, value_for_check, &state_types)
                .map_err(unsupported)?;
            at += n;
        }
        let partitioning = output_partitioning(input.output_partitioning(), &keys, &schema);
        let properties = PlanProperties::new(
            EquivalenceProperties::new(Arc::clone(&schema)),
            partitioning,
            EmissionType::Incremental,
            Boundedness::Bounded,
        );
        Ok(Self {
            input,
            keys,
            aggregates,
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

    /// The group key columns of the input.
    pub fn keys(&self) -> &[usize] {
        &self.keys
    }

    /// The aggregates.
    pub fn aggregates(&self) -> &[PartialAggSpec] {
        &self.aggregates
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }
}

/// Why the group keys `keys` of `schema` are not covered, if they are not: a key type
/// the row format cannot hold (the CPU's group numbering falls back to it).
fn check_keys(schema: &SchemaRef, keys: &[usize]) -> std::result::Result<(), String> {
    let fields = keys
        .iter()
        .map(|k| {
            schema
                .fields()
                .get(*k)
                .map(|f| SortField::new(f.data_type().clone()))
                .ok_or_else(|| format!("group key column {k} out of range"))
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    if RowConverter::supports_fields(&fields) {
        Ok(())
    } else {
        Err(format!("group key types {fields:?}"))
    }
}

/// The input's partitioning as seen in the output: a hash partitioning on key columns
/// holds for the same values in their output positions (so a final aggregate over an
/// already key-partitioned input needs no second shuffle); anything else is unknown.
fn output_partitioning(input: &Partitioning, keys: &[usize], schema: &SchemaRef) -> Partitioning {
    if let Partitioning::Hash(exprs, n) = input {
        let mapped: Option<Vec<Arc<dyn PhysicalExpr>>> = exprs
            .iter()
            .map(|e| {
                let column = e.downcast_ref::<Column>()?;
                let at = keys.iter().position(|k| *k == column.index())?;
                Some(Arc::new(Column::new(schema.field(at).name(), at)) as Arc<dyn PhysicalExpr>)
            })
            .collect();
        if let Some(mapped) = mapped {
            return Partitioning::Hash(mapped, *n);
        }
    }
    Partitioning::UnknownPartitioning(input.partition_count())
}

impl DisplayAs for GpuPartialAggregateExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |range: std::ops::Range<usize>| -> Vec<String> {
            self.schema.fields()[range]
                .iter()
                .map(|f| f.name().clone())
                .collect()
        };
        let keys = names(0..self.keys.len());
        let states = names(self.keys.len()..self.schema.fields().len());
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => write!(
                f,
                "{}: mode=Partial, {}gby=[{}], aggr=[{}]",
                placement_label("GpuPartialAggregateExec", self.placement),
                if as_segment(&self.input).is_some() {
                    "input=device, "
                } else {
                    ""
                },
                keys.join(", "),
                states.join(", ")
            ),
            DisplayFormatType::TreeRender => {
                write!(f, "placement={}\ngby={}", self.placement, keys.join(", "))
            }
        }
    }
}

/// How one aggregate's state column (two for `Counted`) is made from the device's
/// results (indices into them).
#[derive(Debug)]
enum StateFrom {
    /// One result, converted to the state type.
    Result(usize),
    /// AVG's count: NULL where it is 0, as DataFusion's AVG state marks a group without
    /// values (its merge counts a non-null 0 as a value and would finish with 0/0).
    AvgCount(usize),
    /// A sum from its limbs' sums, `Σ result << shift`, wrapped into the state type as
    /// DataFusion's `sum` and `avg` wrap (see `limbs::limb_states`).
    Limbs(Vec<(usize, u32)>),
    /// The checked `sum`'s two state columns from its limbs' results: the sum wrapped
    /// into the state type, then its wrap count.
    Counted(Vec<(usize, u32)>),
}

impl StateFrom {
    /// The state of `func` (AVG: its sum) made from the device results `parts`, each a
    /// result index and its limb's shift (one part of shift 0 unless a sum has limbs).
    fn of(func: PartialFunc, parts: Vec<(usize, u32)>) -> Self {
        match (func, parts.as_slice()) {
            (PartialFunc::CheckedSum, _) => StateFrom::Counted(parts),
            (_, [(at, 0)]) => StateFrom::Result(*at),
            _ => StateFrom::Limbs(parts),
        }
    }
}

/// The state columns (after `keys` key columns of `schema`) made from the device's
/// result columns `results` (one per device aggregate) as `states` says.
fn state_columns(
    states: &[StateFrom],
    schema: &SchemaRef,
    keys: usize,
    results: &[ArrayRef],
) -> Result<Vec<ArrayRef>> {
    let result = |at: usize| {
        results.get(at).ok_or_else(|| {
            DataFusionError::Internal(format!("device aggregate {at} of {}", results.len()))
        })
    };
    let limbs = |parts: &[(usize, u32)]| {
        parts
            .iter()
            .map(|(at, shift)| Ok((result(*at)?, *shift)))
            .collect::<Result<Vec<(&ArrayRef, u32)>>>()
    };
    let mut columns = Vec::with_capacity(states.len());
    for state in states {
        // A state made of two columns is typed by the first.
        let to = schema
            .fields()
            .get(keys + columns.len())
            .ok_or_else(|| {
                DataFusionError::Internal(format!(
                    "state column {} of a {}-column partial aggregate",
                    keys + columns.len(),
                    schema.fields().len()
                ))
            })?
            .data_type();
        match state {
            StateFrom::Result(at) => columns.push(spec::to_state(result(*at)?, to)?),
            StateFrom::AvgCount(at) => columns.push(spec::avg_count_state(result(*at)?)?),
            StateFrom::Limbs(parts) => {
                columns.extend(limb_states(&limbs(parts.as_slice())?, to, false)?)
            }
            StateFrom::Counted(parts) => {
                columns.extend(limb_states(&limbs(parts.as_slice())?, to, true)?)
            }
        }
    }
    Ok(columns)
}

impl GpuPartialAggregateExec {
    /// The metrics of `partition`, running on `exec`'s backend.
    fn partition_metrics(&self, partition: usize, exec: &ExecBackend) -> OperatorMetrics {
        OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuPartialAggregateExec",
            self.placement,
            exec,
        )
    }
}

impl ExecutionPlan for GpuPartialAggregateExec {
    crate::exec_support::operator_basics!("GpuPartialAggregateExec");

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        vec![ChildStats::At(partition)]
    }

    /// After optimisation, as the stock aggregate: a parent's filter on group columns
    /// only (a hash join's dynamic filter over its key) picks groups, so it passes to the
    /// input, where it reaches the scan. TPC-H Q17's semi join filtered the lineitem
    /// scan below the stock partial aggregate down to 6,000 of 6 million rows; below ours
    /// it stopped, and all 6 million went through the aggregation. Without group keys
    /// the aggregate emits a row even from no input, so nothing passes; before
    /// optimisation's end nothing passes either, as for the other GPU operators.
    fn gather_filters_for_pushdown(
        &self,
        phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        _config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        let child = if phase == FilterPushdownPhase::Pre || self.keys.is_empty() {
            ChildFilterDescription::all_unsupported(&parent_filters)
        } else {
            // The filters are remapped to the input by column name: only group columns
            // named as the input column they read qualify.
            let input = self.input.schema();
            let allowed = self
                .keys
                .iter()
                .enumerate()
                .filter(|(i, k)| input.field(**k).name() == self.schema.field(*i).name())
                .map(|(i, _)| i)
                .collect();
            ChildFilterDescription::from_child_with_allowed_indices(
                &parent_filters,
                allowed,
                &self.input,
            )?
        };
        Ok(FilterDescription::new().with_child(child))
    }

    /// At most one row per input row (one per group and batch): the input's row count
    /// as an upper bound, the columns unknown.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        _args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        let mut stats = Statistics::new_unknown(&self.schema());
        if let Some(input) = input_stats.first() {
            stats.num_rows = input.num_rows.to_inexact();
        }
        Ok(Arc::new(stats))
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let exec = GpuPartialAggregateExec::try_new(
            single_child(children, "GpuPartialAggregateExec")?,
            self.keys.clone(),
            self.aggregates.clone(),
            Arc::clone(&self.schema),
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
        // Host batches are not gathered: the device group table is sized for the
        // batches DataFusion hands out (a gathered batch holds more groups and would
        // fall back to the CPU more often).
        let probe = pass_through::SkipProbe::new(context.session_config().options());
        let config = context.session_config().clone();
        let input = input_batches(
            &self.input,
            (&self.backend, self.placement),
            partition,
            context,
        )?;
        let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?.limited_by(&config);
        let metrics = self.partition_metrics(partition, &exec);
        let shared = batches::SegmentStates {
            keys: self.keys.clone(),
            aggregates: self.aggregates.clone(),
            schema: Arc::clone(&self.schema),
            plan: batches::AggregatePlan::new(&self.input.schema(), &self.aggregates),
            probe: std::sync::Mutex::new(probe),
            exec,
            metrics,
            input: Arc::clone(&self.input),
        };
        let batches = each_batch(input.batches, input.backend.as_ref(), move |item| {
            shared.states_of(item)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            batches,
        )))
    }
}
