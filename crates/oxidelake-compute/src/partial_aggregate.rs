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
//! Per batch: the keys become the device's Int64 key column (see `keys`), the arguments
//! its Int64/Float64 values (see `spec`), the device's SUM / COUNT / MIN / MAX op runs
//! (falling back to its CPU path per batch, as every Gpu*Exec does), and the results are
//! turned into the partial state types. A decimal SUM or AVG whose batch could overflow an
//! i64 is cut into slices that cannot; each slice contributes its own partial rows. An
//! integer SUM whose batch could overflow an i64 goes by limbs, so no device sum wraps,
//! and the limbs' sums are joined exactly in i128. OxideLake's checked `sum` gets its
//! state as its own accumulators make it, the sum wrapped into the state type and how
//! many times it wrapped (`crate::checked_sum`), so a group's sum that leaves the state
//! type is carried exactly to the final aggregate, where only the total can overflow.
//! DataFusion's `sum` and `avg` get the wrapped sum, as their wrapping additions make it.
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
mod digits;
mod from_plan;
mod keys;
mod limbs;
mod pass_through;
mod spec;

use std::fmt;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
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
use oxidelake_device::ops::{AggFunc, AggSpec, HostAggregateArgs};

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics, single_child};
use crate::placement_label;
use crate::segment::each_batch;
use crate::segment::replay::{as_segment, input_batches};

use keys::KeyEncoding;
use limbs::{exact_sum_state, limb_states};
pub use spec::{AggInput, MAX_DEVICE_DECIMAL_PRECISION, PartialAggSpec, PartialFunc};
use spec::{DeviceValues, ValueKind};

/// The partial half of a grouped aggregation (see the module docs). Output: the key
/// columns, then each aggregate's state columns, as the given schema names them.
#[derive(Debug)]
pub struct GpuPartialAggregateExec {
    input: Arc<dyn ExecutionPlan>,
    keys: Vec<usize>,
    aggregates: Vec<PartialAggSpec>,
    encoding: Arc<KeyEncoding>,
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
        let encoding = KeyEncoding::for_keys(&input_schema, &keys).map_err(unsupported)?;
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
            // COUNT takes any argument: only its validity travels.
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
            encoding: Arc::new(encoding),
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

/// The partial states of one batch (see the module docs).
struct BatchPlan<'a> {
    keys: &'a [usize],
    aggregates: &'a [PartialAggSpec],
    encoding: &'a KeyEncoding,
    schema: &'a SchemaRef,
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
    /// The checked `sum`'s two state columns from one exact result (`[(at, 0)]`) or
    /// its limbs' results: the sum wrapped into the state type, then its wrap count.
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

/// A value column in device form: one column, or limbs with their shifts.
type DeviceParts = Vec<(ArrayRef, u32)>;

/// What the device computes for one batch.
#[derive(Default)]
struct DeviceWork {
    /// The value columns, one per device aggregate.
    columns: Vec<ArrayRef>,
    /// The aggregate over each column.
    funcs: Vec<AggFunc>,
    /// Each state column of the output (after the keys), in order.
    states: Vec<StateFrom>,
    /// The most rows one device call may sum exactly (decimal sums).
    slice_rows: usize,
    /// The device aggregate counting every row, once one is pushed.
    count_all: Option<usize>,
}

impl DeviceWork {
    /// The device aggregate `func` over `column`: an existing one when the same
    /// aggregate over the same column is already pushed (SUM(x) beside AVG(x)'s sum).
    fn push(&mut self, func: AggFunc, column: ArrayRef) -> usize {
        let same = |(f, c): (&AggFunc, &ArrayRef)| *f == func && Arc::ptr_eq(c, &column);
        if let Some(at) = self.funcs.iter().zip(&self.columns).position(same) {
            return at;
        }
        self.columns.push(column);
        self.funcs.push(func);
        self.funcs.len() - 1
    }

    /// A COUNT of `column`'s valid rows. Every column without NULLs counts every row, so
    /// COUNT(*) and the counts of AVGs over columns without NULLs share one aggregate.
    fn push_count(&mut self, column: ArrayRef) -> usize {
        if column.logical_null_count() > 0 {
            return self.push(AggFunc::Count, column);
        }
        match self.count_all {
            Some(at) => at,
            None => {
                let at = self.push(AggFunc::Count, column);
                self.count_all = Some(at);
                at
            }
        }
    }
}

impl BatchPlan<'_> {
    /// The device work for `batch`: its arguments in the device's numeric model, the
    /// aggregates over them, and how the state columns are made from the results.
    fn device_work(&self, batch: &RecordBatch) -> Result<DeviceWork> {
        let rows = batch.num_rows();
        let mut work = DeviceWork {
            slice_rows: usize::MAX,
            ..DeviceWork::default()
        };
        // Each argument converted once, however many aggregates read it.
        let mut converted: Vec<(&AggInput, bool, DeviceParts)> = Vec::new();
        for spec in self.aggregates {
            if spec.func == PartialFunc::Count {
                let argument = spec
                    .input
                    .as_ref()
                    .map(|input| spec::argument(batch, input))
                    .transpose()?;
                let at = work.push_count(Arc::new(spec::count_input(argument.as_ref(), rows)));
                work.states.push(StateFrom::Result(at));
                continue;
            }
            let input = spec.input.as_ref().ok_or_else(|| {
                DataFusionError::Internal(format!("{} without an argument", spec.func.name()))
            })?;
            let sums = matches!(
                spec.func,
                PartialFunc::Sum | PartialFunc::CheckedSum | PartialFunc::Avg
            );
            let parts = match converted.iter().find(|(i, s, _)| *i == input && *s == sums) {
                Some((_, _, parts)) => parts.clone(),
                None => {
                    let argument = spec::argument(batch, input)?;
                    let kind = ValueKind::of(spec.func, argument.data_type())
                        .map_err(DataFusionError::Internal)?;
                    let values = match spec::to_device(&argument, sums)? {
                        // An integer sum that could overflow an i64 in this batch goes by
                        // limbs, each of which sums exactly (see `spec::int_limbs`).
                        DeviceValues::Int(ints)
                            if sums
                                && kind == ValueKind::Int
                                && spec::rows_per_exact_sum(&ints) < rows =>
                        {
                            spec::int_limbs(&ints)
                        }
                        values => values,
                    };
                    if sums && matches!(kind, ValueKind::Decimal { .. } | ValueKind::Int) {
                        let exact = |ints: &Int64Array| spec::rows_per_exact_sum(ints);
                        match &values {
                            DeviceValues::Int(ints) => {
                                work.slice_rows = work.slice_rows.min(exact(ints))
                            }
                            DeviceValues::Limbs(limbs) => {
                                for (limb, _) in limbs {
                                    work.slice_rows = work.slice_rows.min(exact(limb));
                                }
                            }
                            DeviceValues::Float(_) => {}
                        }
                    }
                    let parts = values.into_parts();
                    converted.push((input, sums, parts.clone()));
                    parts
                }
            };
            if spec.func == PartialFunc::Avg {
                // AVG's state: the count of values, then their sum.
                let at = work.push_count(Arc::clone(&parts[0].0));
                work.states.push(StateFrom::AvgCount(at));
            }
            let func = match spec.func {
                PartialFunc::Min => AggFunc::Min,
                PartialFunc::Max => AggFunc::Max,
                _ => AggFunc::Sum,
            };
            let parts = parts
                .iter()
                .map(|(column, shift)| (work.push(func, Arc::clone(column)), *shift))
                .collect();
            work.states.push(StateFrom::of(spec.func, parts));
        }
        Ok(work)
    }

    /// The device batch's schema: the Int64 key, then the value columns.
    fn device_schema(columns: &[ArrayRef]) -> SchemaRef {
        let mut fields = vec![Field::new("key", DataType::Int64, true)];
        fields.extend(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| Field::new(format!("v{i}"), c.data_type().clone(), true)),
        );
        Arc::new(Schema::new(fields))
    }

    /// Aggregates `batch` (see the module docs) on `exec`'s backend when `device`, each
    /// slice's device state claimed from the device budget (the CPU's past it); on its
    /// CPU reference otherwise.
    fn run_where(
        &self,
        exec: &ExecBackend,
        metrics: &OperatorMetrics,
        batch: &RecordBatch,
        device: bool,
    ) -> Result<RecordBatch> {
        if batch.num_rows() == 0 {
            return Ok(RecordBatch::new_empty(Arc::clone(self.schema)));
        }
        let work = self.device_work(batch)?;
        let specs: Vec<AggSpec> = work
            .funcs
            .iter()
            .enumerate()
            .map(|(i, func)| AggSpec {
                func: *func,
                column: i + 1,
            })
            .collect();
        let device_schema = Self::device_schema(&work.columns);
        let mut outputs = Vec::new();
        let mut offset = 0;
        while offset < batch.num_rows() {
            let len = work.slice_rows.min(batch.num_rows() - offset);
            let slice = batch.slice(offset, len);
            let encoded = self.encoding.encode(&slice, self.keys)?;
            let mut columns: Vec<ArrayRef> = vec![Arc::new(encoded.column.clone())];
            columns.extend(work.columns.iter().map(|v| v.slice(offset, len)));
            let device_batch = RecordBatch::try_new(Arc::clone(&device_schema), columns)?;
            let aggregate = |backend: &dyn oxidelake_device::GpuBackend, stream: &_| {
                oxidelake_device::edge::aggregate(
                    backend,
                    stream,
                    HostAggregateArgs {
                        batch: &device_batch,
                        group_column: 0,
                        aggregates: &specs,
                    },
                )
            };
            // On the device: the slice's columns and a group table of two words per
            // aggregate.
            let state = || {
                device_batch.get_array_memory_size()
                    + crate::device_budget::table_bytes(
                        len,
                        2 * specs.len(),
                        crate::device_budget::GROUP_TABLE_SLOTS,
                    )
            };
            let result = if device {
                exec.run_within_budget(metrics, state, aggregate)?
            } else {
                aggregate(&exec.cpu, &exec.cpu_stream).map_err(DataFusionError::from)?
            };
            let group_keys = result
                .column(0)
                .as_primitive_opt::<Int64Type>()
                .ok_or_else(|| {
                    DataFusionError::Internal("device aggregate returned a non-Int64 key".into())
                })?;
            let states = state_columns(
                &work.states,
                self.schema,
                self.keys.len(),
                &result.columns()[1..],
            )?;
            let mut out = self
                .encoding
                .decode(&encoded, group_keys, &slice, self.keys)?;
            out.extend(states);
            outputs.push(RecordBatch::try_new(Arc::clone(self.schema), out)?);
            offset += len;
        }
        Ok(match outputs.len() {
            1 => outputs.swap_remove(0),
            _ => arrow::compute::concat_batches(self.schema, &outputs)?,
        })
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
            StateFrom::Counted(parts) => match parts.as_slice() {
                [(at, 0)] => columns.extend(exact_sum_state(result(*at)?, to)?),
                parts => columns.extend(limb_states(&limbs(parts)?, to, true)?),
            },
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
    fn name(&self) -> &str {
        "GpuPartialAggregateExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

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
            false,
        )?;
        let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?.limited_by(&config);
        let metrics = self.partition_metrics(partition, &exec);
        let shared = batches::SegmentStates {
            keys: self.keys.clone(),
            aggregates: self.aggregates.clone(),
            encoding: Arc::clone(&self.encoding),
            schema: Arc::clone(&self.schema),
            plan: batches::DevicePlan::new(&self.input.schema(), &self.aggregates),
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

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
}
