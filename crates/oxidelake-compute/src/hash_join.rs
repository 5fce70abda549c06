//! `GpuHashJoinExec`: inner, right-semi and right-anti equi-joins on one or more keys,
//! with an optional join filter.
//!
//! The left input is the build side, in one of DataFusion's two partition modes:
//! - CollectLeft: all of its partitions are collected once, shared by every output
//!   partition;
//! - Partitioned: both inputs are hash-partitioned on the keys, and output partition `i`
//!   builds from left partition `i` alone, so the build work and memory are split across
//!   partitions (and Ballista tasks) as stock DataFusion splits them.
//!
//! The backend indexes the build rows' keys (`edge::build_join_table`). Each right
//! (probe) partition then streams through the edge's probe, the backend's one join asked
//! for the pairs' row numbers (`edge::probe_join_table`); the join filter, if any, drops the
//! key-matched pairs it rejects (`residual`); an inner join gathers the remaining pairs'
//! rows of both sides with Arrow's `take`, a semi or anti join keeps the probe rows with
//! (or without) a pair (without a join filter the probe lists those rows itself). NULL keys never match. One integer-like key is
//! widened to Int64; other keys are numbered on the host first (`keys`).
//!
//! Where both inputs hand on device batches (ADR-0014, ADR-0015), an inner, right semi
//! or right anti join without a join filter on integer-like keys builds, probes and
//! gathers its output on the device (see `device`); EXPLAIN says `probe=device,
//! build=device`.
//!
//! Left semi and anti joins are not an operator mode: they emit build rows once every
//! probe partition has been seen, which needs a visited bitmap shared by all of them (and,
//! in a cluster, by tasks in other processes). The placement rule runs them as the right
//! semi / anti join with the inputs swapped instead.

mod build_memory;
mod device;
mod dynamic_filter;
mod key_set;
mod keys;
mod radix;
mod residual;

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{Array, ArrayRef, BooleanArray, Int64Array, UInt32Array};
use arrow::compute::{concat_batches, filter_record_batch, take};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::record_batch::RecordBatch;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{JoinType, NullEquality};
use datafusion::config::ConfigOptions;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::{Column, DynamicFilterPhysicalExpr};
use datafusion::physical_plan::filter_pushdown::{
    ChildPushdownResult, FilterDescription, FilterPushdownPhase, FilterPushdownPropagation,
};
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{HashJoinExecBuilder, PartitionMode};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricBuilder, MetricsSet};
use datafusion::physical_plan::projection::{EmbeddedProjection, ProjectionExec};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, InputDistributionRequirements,
    PlanProperties, Statistics, StatisticsArgs, statistics::ChildStats,
};
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt, TryStreamExt};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::JoinTable;
use oxidelake_device::ops::ProbeRows;

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics};
use crate::gathering::coalesce_small;
use crate::placement_label;
use crate::segment::{each_batch, host_items};
use dynamic_filter::{BuildFilter, ListLimits};
pub use keys::numbered_key_type;
use keys::{JoinKeys, KeyDictionary, build_keys, probe_keys};

/// The collected build side and its hash table.
#[derive(Debug)]
struct BuildSide {
    /// The build rows on the host: collected there, or copied from `device` the first
    /// time a host path needs them (a probe batch the device refused).
    host: std::sync::OnceLock<RecordBatch>,
    /// For a side built on the device (`device`): the build rows there and the table
    /// over them.
    device: Option<(oxidelake_device::DeviceBatch, JoinTable)>,
    /// For a side built from host batches: the table over `key_column` through the
    /// host edge, on the join's backend or on the CPU where the device budget or the
    /// device refused it.
    keyed: Option<JoinTable>,
    /// Columns of the build input.
    width: usize,
    /// The device key column the table was built from.
    key_column: Int64Array,
    /// For a side built on the device: its key columns in their own types (the only
    /// part of the side on the host), for the dynamic filter.
    device_keys: Option<Vec<ArrayRef>>,
    /// For a side built on the device over several key columns: its digits over the
    /// build side's key columns, which probes read theirs with (`device`).
    device_digits: Option<Vec<oxidelake_device::ops::RadixDigit>>,
    /// For numbered keys: the build keys' numbers, which probes look up.
    dictionary: Option<KeyDictionary>,
    /// A CPU table over `key_column`, built on first need: when the device fails a
    /// probe, the table it holds is unusable and the rest of the join probes this one,
    /// as does a probe batch the device refused beside a side built there.
    cpu_table: std::sync::OnceLock<JoinTable>,
    /// The host memory above, held in the query's pool while the side lives.
    reservation: MemoryReservation,
    /// The device bytes of a side built on the device, claimed from the process's
    /// budget while the side lives.
    _device_claim: Option<crate::DeviceClaim>,
}

impl BuildSide {
    /// Reports this side's key columns (`keys`: their indices in the build input) to the
    /// join's dynamic filter, if it has one.
    fn fill(&self, filter: Option<&BuildFilter>, keys: &[usize]) {
        let Some(filter) = filter else {
            return;
        };
        let columns: Vec<ArrayRef> = match (&self.device_keys, self.host.get()) {
            (Some(device_keys), _) => device_keys.clone(),
            (None, Some(batch)) => keys.iter().map(|k| Arc::clone(batch.column(*k))).collect(),
            // Not reached: a side has its rows on the host or its keys from the device.
            (None, None) => return,
        };
        filter.report(&columns);
    }

    /// The build rows on the host, copied from the device once if the side was built
    /// there (held in the query's pool from then on).
    fn host_batch(&self, exec: &ExecBackend) -> Result<&RecordBatch> {
        if let Some(batch) = self.host.get() {
            return Ok(batch);
        }
        let (device, _) = self.device.as_ref().ok_or_else(|| {
            DataFusionError::Internal("a join build side with no rows anywhere".into())
        })?;
        let batch =
            oxidelake_device::device_batch::download(exec.backend.as_ref(), &exec.stream, device)
                .map_err(DataFusionError::from)?;
        Ok(self.host.get_or_init(|| {
            self.reservation.grow(batch.get_array_memory_size());
            batch
        }))
    }

    /// The CPU table, built from the side's key column once.
    fn cpu_table(&self, exec: &ExecBackend) -> Result<&JoinTable> {
        if let Some(table) = self.cpu_table.get() {
            return Ok(table);
        }
        let table =
            oxidelake_device::edge::build_join_table(&exec.cpu, &exec.cpu_stream, &self.key_column)
                .map_err(DataFusionError::from)?;
        Ok(self.cpu_table.get_or_init(|| {
            // The copy lives in host memory, whatever the limit: the probe must finish.
            self.reservation.grow(table.allocated_bytes());
            table
        }))
    }
}

/// Hash join of `left.l1 = right.r1 AND left.l2 = right.r2 …` (and the join filter, if
/// any). Inner: every left column followed by every right column, per match.
/// Right: the inner rows, and each probe row without a match once, its left columns
/// NULL. RightSemi / RightAnti: the right (probe) rows that have at least one match /
/// none, in probe order (a NULL key never matches, so the anti join keeps it: NOT EXISTS
/// semantics; the null-aware NOT IN join is not covered).
#[derive(Debug)]
pub struct GpuHashJoinExec {
    left: Arc<dyn ExecutionPlan>,
    right: Arc<dyn ExecutionPlan>,
    /// The key column pairs (left, right).
    on: Vec<(usize, usize)>,
    filter: Option<JoinFilter>,
    join_type: JoinType,
    /// CollectLeft or Partitioned (module docs).
    mode: PartitionMode,
    /// The output columns, as indices into the unprojected output (build columns then
    /// probe columns; probe columns for semi and anti joins). Only these are gathered.
    projection: Option<Vec<usize>>,
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    build: Arc<tokio::sync::OnceCell<std::result::Result<Arc<BuildSide>, Arc<DataFusionError>>>>,
    /// The dynamic filter DataFusion's filter pushdown gave this join to fill from its
    /// build side (`dynamic_filter`), if any.
    build_filter: Option<Arc<BuildFilter>>,
    /// `oxidelake.memory.device_limit` for the build side (the session's, read when the
    /// join executes, where this is unset; else a share of the device's memory): it
    /// claims its device bytes from the process's `DeviceBudget` up to this limit, and its
    /// table is built on the CPU past it.
    device_limit: Option<usize>,
    /// Whoever runs this join holds its build side's device claim already (a grace
    /// join's pair): the join claims nothing itself.
    build_claimed_by_caller: bool,
}

impl GpuHashJoinExec {
    /// Joins `left` (build) and `right` (probe) on their Int64 key columns.
    pub fn try_new(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        left_key: usize,
        right_key: usize,
        placement: BackendKind,
    ) -> Result<Self> {
        Self::try_new_with_type(left, right, left_key, right_key, JoinType::Inner, placement)
    }

    /// A join of `join_type` (Inner, RightSemi or RightAnti) on one key pair.
    pub fn try_new_with_type(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        left_key: usize,
        right_key: usize,
        join_type: JoinType,
        placement: BackendKind,
    ) -> Result<Self> {
        Self::try_new_on(
            left,
            right,
            vec![(left_key, right_key)],
            None,
            join_type,
            placement,
        )
    }

    /// A join of `join_type` (Inner, Right, RightSemi or RightAnti; others are
    /// `Unsupported`) on the key column pairs `on`, each pair of one type
    /// ([`numbered_key_type`]), keeping only the pairs `filter` accepts. The filter's
    /// `Left` side is `left`. The build side is collected whole (CollectLeft).
    pub fn try_new_on(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        on: Vec<(usize, usize)>,
        filter: Option<JoinFilter>,
        join_type: JoinType,
        placement: BackendKind,
    ) -> Result<Self> {
        Self::try_new_in_mode(
            left,
            right,
            on,
            filter,
            join_type,
            PartitionMode::CollectLeft,
            placement,
        )
    }

    /// [`GpuHashJoinExec::try_new_on`] in partition mode `mode`: CollectLeft, or
    /// Partitioned (both inputs hash-partitioned on the keys, each output partition
    /// building from its own left partition). `Auto` is a planning-time mode and is
    /// refused.
    pub fn try_new_in_mode(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        on: Vec<(usize, usize)>,
        filter: Option<JoinFilter>,
        join_type: JoinType,
        mode: PartitionMode,
        placement: BackendKind,
    ) -> Result<Self> {
        if mode == PartitionMode::Auto {
            return Err(EngineError::unsupported(
                "GpuHashJoinExec partition mode",
                "Auto (DataFusion resolves it to CollectLeft or Partitioned while planning)",
            )
            .into());
        }
        if !matches!(
            join_type,
            JoinType::Inner | JoinType::Right | JoinType::RightSemi | JoinType::RightAnti
        ) {
            return Err(EngineError::unsupported(
                "GpuHashJoinExec join type",
                format!("{join_type} (Inner, Right, RightSemi and RightAnti are covered)"),
            )
            .into());
        }
        let (ls, rs) = (left.schema(), right.schema());
        if on.is_empty() {
            return Err(DataFusionError::Plan(
                "GpuHashJoinExec needs a key pair".into(),
            ));
        }
        for (l, r) in &on {
            let (lf, rf) = match (ls.fields().get(*l), rs.fields().get(*r)) {
                (Some(lf), Some(rf)) => (lf, rf),
                _ => {
                    return Err(DataFusionError::Plan(format!(
                        "join key pair ({l}, {r}) out of range"
                    )));
                }
            };
            let (lt, rt) = (lf.data_type(), rf.data_type());
            if lt != rt || !numbered_key_type(lt) {
                return Err(EngineError::unsupported(
                    "GpuHashJoinExec key",
                    format!(
                        "{} ({lt}) = {} ({rt}); keys of one integer, decimal, date, \
                         timestamp, boolean or string type are covered",
                        lf.name(),
                        rf.name()
                    ),
                )
                .into());
            }
        }
        // The plan properties of the stock operator this one stands for (`stock_join`).
        let stock = stock_join(&left, &right, &on, filter.as_ref(), join_type, mode, None)?;
        let schema = stock.schema();
        let properties = stock.properties().as_ref().clone();
        Ok(Self {
            left,
            right,
            on,
            filter,
            join_type,
            mode,
            projection: None,
            placement,
            backend: BackendChoice::Detect,
            schema,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            build: Arc::new(tokio::sync::OnceCell::new()),
            build_filter: None,
            device_limit: None,
            build_claimed_by_caller: false,
        })
    }

    /// Emits only the columns `projection` names (indices into the unprojected output),
    /// as the stock join's embedded projection does: columns nobody reads are never
    /// gathered.
    pub fn with_projection(mut self, projection: Option<Vec<usize>>) -> Result<Self> {
        self.projection = projection;
        let stock = self.stock()?;
        self.schema = stock.schema();
        self.properties = Arc::new(stock.properties().as_ref().clone());
        Ok(self)
    }

    /// A new join over the same inputs, keys, filter, mode, projection and backend (its
    /// own build state and metrics).
    fn rebuilt(
        &self,
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        projection: Option<Vec<usize>>,
    ) -> Result<Self> {
        let join = GpuHashJoinExec::try_new_in_mode(
            left,
            right,
            self.on.clone(),
            self.filter.clone(),
            self.join_type,
            self.mode,
            self.placement,
        )?
        .with_projection(projection)?
        .with_backend(self.backend.clone())
        .with_device_limit(self.device_limit);
        let join = Self {
            build_claimed_by_caller: self.build_claimed_by_caller,
            ..join
        };
        Ok(match &self.build_filter {
            // The same filter (the probe side's scans hold it), with its own reports.
            Some(f) => join.with_build_filter(Arc::clone(f.filter()), f.list_limits()),
            None => join,
        })
    }

    /// This join over new inputs `left` and `right` that hand on device batches (the
    /// transition rule's stage-3 rewrite), its build side bounded by `device_limit`.
    pub fn over_device_inputs(
        &self,
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        device_limit: Option<usize>,
    ) -> Result<Self> {
        Ok(self
            .rebuilt(left, right, self.projection.clone())?
            .with_device_limit(device_limit))
    }

    /// This join with a build side built on the device bounded by `limit`
    /// (`oxidelake.memory.device_limit`; see `device`).
    pub fn with_device_limit(mut self, limit: Option<usize>) -> Self {
        self.device_limit = limit;
        self
    }

    /// This join run by an operator that claims its build side's device bytes itself
    /// (the grace join, for each pair it joins on the device): it claims nothing more.
    pub fn with_build_claimed_by_caller(mut self) -> Self {
        self.build_claimed_by_caller = true;
        self
    }

    /// This join filling `filter` from its build side(s), listing the keys within
    /// `list_limits`.
    fn with_build_filter(
        mut self,
        filter: Arc<DynamicFilterPhysicalExpr>,
        list_limits: ListLimits,
    ) -> Self {
        let probe_schema = self.right.schema();
        let probe_keys = self
            .on
            .iter()
            .map(|(_, r)| {
                Arc::new(Column::new(probe_schema.field(*r).name(), *r)) as Arc<dyn PhysicalExpr>
            })
            .collect();
        let builds = match self.mode {
            PartitionMode::Partitioned => self.left.properties().partitioning.partition_count(),
            _ => 1,
        };
        self.build_filter = Some(Arc::new(BuildFilter::new(
            filter,
            probe_keys,
            probe_schema,
            builds,
            list_limits,
        )));
        self
    }

    /// The stock join this one stands for, with this one's projection.
    fn stock(&self) -> Result<datafusion::physical_plan::joins::HashJoinExec> {
        stock_join(
            &self.left,
            &self.right,
            &self.on,
            self.filter.as_ref(),
            self.join_type,
            self.mode,
            self.projection.clone(),
        )
    }

    /// The output columns, when projected (see [`GpuHashJoinExec::with_projection`]).
    pub fn projection(&self) -> Option<&[usize]> {
        self.projection.as_deref()
    }

    /// Runs on `backend` instead of asking the hardware detector at execute time.
    pub fn with_backend(mut self, backend: BackendChoice) -> Self {
        self.backend = backend;
        self
    }

    /// The build side.
    pub fn left(&self) -> &Arc<dyn ExecutionPlan> {
        &self.left
    }

    /// The probe side.
    pub fn right(&self) -> &Arc<dyn ExecutionPlan> {
        &self.right
    }

    /// The key column pairs (left, right).
    pub fn on(&self) -> &[(usize, usize)] {
        &self.on
    }

    /// The join filter, whose `Left` side is the build side.
    pub fn filter(&self) -> Option<&JoinFilter> {
        self.filter.as_ref()
    }

    fn key_encodings(&self) -> (JoinKeys, JoinKeys) {
        let types: Vec<DataType> = self
            .on
            .iter()
            .map(|(l, _)| self.left.schema().field(*l).data_type().clone())
            .collect();
        let (l, r): (Vec<usize>, Vec<usize>) = self.on.iter().copied().unzip();
        (JoinKeys::new(l, &types), JoinKeys::new(r, &types))
    }

    /// The join type (Inner, Right, RightSemi or RightAnti).
    pub fn join_type(&self) -> JoinType {
        self.join_type
    }

    /// The partition mode: CollectLeft or Partitioned.
    pub fn mode(&self) -> PartitionMode {
        self.mode
    }

    /// The name of column `i` of the unprojected output.
    fn unprojected_name(&self, i: usize) -> Option<String> {
        let (ls, rs) = (self.left.schema(), self.right.schema());
        let probe_only = !matches!(self.join_type, JoinType::Inner | JoinType::Right);
        let field = if probe_only {
            rs.fields().get(i)
        } else if i < ls.fields().len() {
            ls.fields().get(i)
        } else {
            rs.fields().get(i - ls.fields().len())
        };
        field.map(|f| f.name().clone())
    }

    /// The key expressions of one side, as the stock operator states its distribution.
    fn key_exprs(&self, left: bool) -> Vec<Arc<dyn PhysicalExpr>> {
        let schema = if left {
            self.left.schema()
        } else {
            self.right.schema()
        };
        self.on
            .iter()
            .map(|(l, r)| {
                let i = if left { *l } else { *r };
                Arc::new(Column::new(schema.field(i).name(), i)) as Arc<dyn PhysicalExpr>
            })
            .collect()
    }

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
    }

    /// What probing `partition` needs: the backend, metrics, the probe spec and the
    /// build side's future. `device_build` is the build input whose device batches the
    /// side is built from (`device`), if it is built on the device.
    fn probing(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
        exec: ExecBackend,
        device_build: Option<Arc<dyn ExecutionPlan>>,
    ) -> Probing {
        let build_filter = self.build_filter.clone();
        let build_keys: Vec<usize> = self.on.iter().map(|(l, _)| *l).collect();
        let exec = Arc::new(exec.limited_by(context.session_config()));
        let device_limit = match self.build_claimed_by_caller {
            true => None,
            false => self.device_limit.or(exec.device_limit()),
        };
        let metrics = Arc::new(OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuHashJoinExec",
            self.placement,
            &exec,
        ));
        let (build_encoding, probe_encoding) = self.key_encodings();
        let join = Arc::new(ProbeSpec {
            keys: probe_encoding,
            filter: self.filter.clone(),
            join_type: self.join_type,
            projection: self.projection.clone(),
        });
        let build_with = BuildInputs {
            left: Arc::clone(&self.left),
            device_source: device_build,
            device_limit,
            kept_on_host: MetricBuilder::new(&self.metrics)
                .counter("device_budget_host_builds", partition),
            encoding: build_encoding,
            exec: Arc::clone(&exec),
            metrics: Arc::clone(&metrics),
        };
        let build: BoxFuture<'static, Result<Arc<BuildSide>>> = match self.mode {
            // This partition's own build rows, for this partition's probe only.
            PartitionMode::Partitioned => {
                let reservation = build_memory::reservation(&context, Some(partition));
                async move {
                    let side = build_with
                        .collect_and_build(vec![partition], context, reservation)
                        .await?;
                    side.fill(build_filter.as_deref(), &build_keys);
                    Ok(side)
                }
                .boxed()
            }
            // Every left partition, collected and indexed once for all output partitions.
            _ => {
                let once = Arc::clone(&self.build);
                // A failed build is kept too and shared with every partition: trying
                // again would execute the build input's partitions a second time, which
                // DataFusion's repartitions do not allow (they panic).
                async move {
                    once.get_or_init(|| {
                        let reservation = build_memory::reservation(&context, None);
                        let partitions = 0..build_with
                            .source()
                            .properties()
                            .partitioning
                            .partition_count();
                        async move {
                            let side = build_with
                                .collect_and_build(partitions.collect(), context, reservation)
                                .await
                                .map_err(|e| match e {
                                    DataFusionError::Shared(shared) => shared,
                                    e => Arc::new(e),
                                })?;
                            side.fill(build_filter.as_deref(), &build_keys);
                            Ok(side)
                        }
                    })
                    .await
                    .clone()
                    .map_err(DataFusionError::Shared)
                }
                .boxed()
            }
        };
        Probing {
            exec,
            metrics,
            join,
            schema: Arc::clone(&self.schema),
            build,
        }
    }

    /// Whether a device can run this join where both inputs are device batches
    /// (see `device`): an inner, right semi or right anti join without a join
    /// filter, on key columns that are all integer-like (one key read in place, several
    /// combined into one key digit by digit). The transition rule makes such a join a
    /// resident operator when its inputs hand on device batches, or one does and the
    /// other can be uploaded.
    pub fn joins_on_device(&self) -> bool {
        let (left, right) = (self.left.schema(), self.right.schema());
        let integer = |schema: &SchemaRef, i: usize| {
            schema
                .fields()
                .get(i)
                .is_some_and(|f| oxidelake_device::ops::widens_exactly(f.data_type()))
        };
        matches!(
            self.join_type,
            JoinType::Inner | JoinType::RightSemi | JoinType::RightAnti
        ) && self.filter.is_none()
            && !self.on.is_empty()
            && self
                .on
                .iter()
                .all(|(l, r)| integer(&left, *l) && integer(&right, *r))
    }
}

impl DisplayAs for GpuHashJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (ls, rs) = (self.left.schema(), self.right.schema());
        let name = |s: &SchemaRef, i: usize| {
            s.fields()
                .get(i)
                .map(|f| f.name().clone())
                .unwrap_or_default()
        };
        match t {
            DisplayFormatType::Default | DisplayFormatType::Verbose => {
                let on: Vec<String> = self
                    .on
                    .iter()
                    .map(|(l, r)| format!("({}@{l}, {}@{r})", name(&ls, *l), name(&rs, *r)))
                    .collect();
                write!(
                    f,
                    "{}: mode={:?}, join_type={}, on=[{}]",
                    placement_label("GpuHashJoinExec", self.placement),
                    self.mode,
                    self.join_type,
                    on.join(", ")
                )?;
                if self.gives_device_batches() {
                    write!(f, ", probe=device, build=device")?;
                }
                if let Some(filter) = &self.filter {
                    write!(f, ", filter={}", filter.expression())?;
                }
                if let Some(projection) = &self.projection {
                    let names: Vec<String> = projection
                        .iter()
                        .map(|i| match self.unprojected_name(*i) {
                            Some(name) => format!("{name}@{i}"),
                            None => format!("@{i}"),
                        })
                        .collect();
                    write!(f, ", projection=[{}]", names.join(", "))?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                write!(
                    f,
                    "placement={}\nmode={:?}\njoin_type={}",
                    self.placement, self.mode, self.join_type
                )
            }
        }
    }
}

impl ExecutionPlan for GpuHashJoinExec {
    crate::exec_support::operator_basics!("GpuHashJoinExec");

    /// What the stock operator in the same mode requires. CollectLeft: the build side as
    /// one partition (each output partition probes the whole build table), the probe
    /// side as it comes; declaring it lets Ballista cut a stage below the build side, so
    /// every task builds from all of it and not just its own file split. Partitioned:
    /// both sides hash-partitioned on their keys, partition for partition.
    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        match self.mode {
            PartitionMode::Partitioned => InputDistributionRequirements::co_partitioned(vec![
                Distribution::KeyPartitioned(self.key_exprs(true)),
                Distribution::KeyPartitioned(self.key_exprs(false)),
            ]),
            _ => InputDistributionRequirements::new(vec![
                Distribution::SinglePartition,
                Distribution::UnspecifiedDistribution,
            ]),
        }
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.left, &self.right]
    }

    /// The output follows the probe side's row order (both backends emit matches in probe
    /// order), and the plan properties say so. Only the inner join also offers it for
    /// sort pushdown: DataFusion's pushdown maps a sort through a two-input node as if
    /// the output were the build columns followed by the probe columns, which a semi or
    /// anti join's probe-only output is not (a sort on the output's second column reached
    /// the probe side as a sort on its first; TPC-H Q20 then failed SanityCheckPlan).
    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false, self.join_type == JoinType::Inner]
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
        let [left, right] = <[Arc<dyn ExecutionPlan>; 2]>::try_from(children).map_err(|c| {
            DataFusionError::Internal(format!("GpuHashJoinExec takes 2 children, got {}", c.len()))
        })?;
        Ok(Arc::new(self.rebuilt(
            left,
            right,
            self.projection.clone(),
        )?))
    }

    fn try_swapping_with_projection(
        &self,
        projection: &ProjectionExec,
    ) -> Result<Option<Arc<dyn ExecutionPlan>>> {
        crate::embedded_projection::try_embed(projection, self)
    }

    /// As the stock join: which parent filters reach which input, and (after
    /// optimisation) a dynamic filter for the probe side where the join type allows one.
    fn gather_filters_for_pushdown(
        &self,
        phase: FilterPushdownPhase,
        parent_filters: Vec<Arc<dyn PhysicalExpr>>,
        config: &ConfigOptions,
    ) -> Result<FilterDescription> {
        self.stock()?
            .gather_filters_for_pushdown(phase, parent_filters, config)
    }

    crate::exec_support::stock_estimates!(2);

    /// Keeps the dynamic filter the probe side took, to fill it from the build side.
    fn handle_child_pushdown_result(
        &self,
        _phase: FilterPushdownPhase,
        child_pushdown_result: ChildPushdownResult,
        config: &ConfigOptions,
    ) -> Result<FilterPushdownPropagation<Arc<dyn ExecutionPlan>>> {
        let taken = child_pushdown_result
            .self_filters
            .get(1)
            .and_then(|filters| filters.first())
            .map(|f| Arc::clone(&f.predicate) as Arc<dyn std::any::Any + Send + Sync>)
            .and_then(|f| Arc::downcast::<DynamicFilterPhysicalExpr>(f).ok());
        let mut result = FilterPushdownPropagation::if_any(child_pushdown_result);
        if let Some(filter) = taken {
            let join = self
                .rebuilt(
                    Arc::clone(&self.left),
                    Arc::clone(&self.right),
                    self.projection.clone(),
                )?
                .with_build_filter(filter, ListLimits::from_config(config));
            result = result.with_updated_node(Arc::new(join) as Arc<dyn ExecutionPlan>);
        }
        Ok(result)
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        // Host batches, gathered to a device's batch size: a join over device batches
        // is a segment operator (`device`), executed through `execute_segment`.
        let exec = ExecBackend::new(&self.backend, self.placement)?;
        let input = host_items(
            self.right.execute(partition, Arc::clone(&context))?,
            exec.backend.batching(),
        );
        let batch_size = context.session_config().batch_size().max(1);
        let Probing {
            exec,
            metrics,
            join,
            schema,
            build,
        } = self.probing(partition, context, exec, None);
        // Probe batches are probed on the blocking pool on a device backend, as they
        // come on the CPU (ADR-0012). A gathered probe can match into a batch far beyond
        // the session's batch size, so the output is handed on in slices of that size.
        let stream = futures::stream::once(async move {
            let output = Arc::clone(&schema);
            let side = build.await?;
            let backend = Arc::clone(&exec.backend);
            let joined = each_batch(input, backend.as_ref(), move |item| {
                let batch = item.batch.as_host().ok_or_else(|| {
                    DataFusionError::Internal("a host probe batch on the device".into())
                })?;
                probe_batch(&exec, &metrics, &side, batch, &join, &schema)
            });
            let sliced = joined.flat_map(move |batch| {
                futures::stream::iter(match batch {
                    Ok(batch) => slices(&batch, batch_size).into_iter().map(Ok).collect(),
                    Err(e) => vec![Err(e)],
                })
            });
            // A selective join matches few rows per probe batch: those small batches are
            // merged (see `coalesce_small`).
            Ok::<_, DataFusionError>(coalesce_small(
                Box::pin(RecordBatchStreamAdapter::new(output, sliced)),
                batch_size,
            ))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }
}

impl EmbeddedProjection for GpuHashJoinExec {
    /// `projection` indexes the current output; it is composed with the join's own.
    fn with_projection(&self, projection: Option<Vec<usize>>) -> Result<Self> {
        let composed = match projection {
            None => self.projection.clone(),
            Some(then) => Some(
                crate::embedded_projection::compose(self.projection.as_deref(), &then).ok_or_else(
                    || {
                        DataFusionError::Internal(format!(
                            "projection {then:?} beyond the join's {} columns",
                            self.schema.fields().len()
                        ))
                    },
                )?,
            ),
        };
        self.rebuilt(Arc::clone(&self.left), Arc::clone(&self.right), composed)
    }
}

/// The stock operator this one stands for, whose plan properties and schema it reports:
/// a HashJoinExec in the same mode on the same keys, filter and projection. It shifts the
/// probe side's partitioning and orderings past the build side's columns and knows the
/// key equivalences; both backends emit matches in probe-row order (the device writes
/// each probe row's pairs at its prefix-sum offset, the filter keeps their order), so
/// every claim holds here.
fn stock_join(
    left: &Arc<dyn ExecutionPlan>,
    right: &Arc<dyn ExecutionPlan>,
    on: &[(usize, usize)],
    filter: Option<&JoinFilter>,
    join_type: JoinType,
    mode: PartitionMode,
    projection: Option<Vec<usize>>,
) -> Result<datafusion::physical_plan::joins::HashJoinExec> {
    let (ls, rs) = (left.schema(), right.schema());
    let stock_on = on
        .iter()
        .map(|(l, r)| {
            (
                Arc::new(Column::new(ls.field(*l).name(), *l)) as Arc<dyn PhysicalExpr>,
                Arc::new(Column::new(rs.field(*r).name(), *r)) as Arc<dyn PhysicalExpr>,
            )
        })
        .collect();
    HashJoinExecBuilder::new(Arc::clone(left), Arc::clone(right), stock_on, join_type)
        .with_filter(filter.cloned())
        .with_partition_mode(mode)
        .with_null_equality(NullEquality::NullEqualsNothing)
        .with_projection(projection)
        .build()
}

/// `batch` as zero-copy slices of at most `rows` rows (itself when it is no longer).
fn slices(batch: &RecordBatch, rows: usize) -> Vec<RecordBatch> {
    if batch.num_rows() <= rows {
        return vec![batch.clone()];
    }
    (0..batch.num_rows())
        .step_by(rows)
        .map(|start| batch.slice(start, rows.min(batch.num_rows() - start)))
        .collect()
}

/// What building one join table needs besides the rows: the build input, its key
/// encoding, and where and how the work is counted.
struct BuildInputs {
    left: Arc<dyn ExecutionPlan>,
    /// The plan whose device batches the side is built from, when it is built on the
    /// device (`device`): the left input, or the input of its partition coalescing.
    device_source: Option<Arc<dyn ExecutionPlan>>,
    /// The device limit a side built on the device claims its bytes under.
    device_limit: Option<usize>,
    /// Build sides kept on the host because the device budget refused them.
    kept_on_host: datafusion::physical_plan::metrics::Count,
    encoding: JoinKeys,
    exec: Arc<ExecBackend>,
    metrics: Arc<OperatorMetrics>,
}

impl BuildInputs {
    /// The plan whose partitions are collected.
    fn source(&self) -> &Arc<dyn ExecutionPlan> {
        self.device_source.as_ref().unwrap_or(&self.left)
    }

    /// Collects `partitions` of the build input under `reservation` and builds the
    /// table: on tokio's blocking pool when the backend is a device, whose table build
    /// blocks on copies and kernels and would hold a runtime worker other tasks need;
    /// inline on the CPU backend, as DataFusion's own join builds.
    async fn collect_and_build(
        self,
        partitions: Vec<usize>,
        context: Arc<TaskContext>,
        reservation: MemoryReservation,
    ) -> Result<Arc<BuildSide>> {
        if let Some(source) = self.device_source.clone() {
            return device::collect_and_build(self, source, partitions, context, reservation).await;
        }
        let batches =
            build_memory::collect_reserved(&self.left, partitions, &context, &reservation).await?;
        let schema = self.left.schema();
        let Self {
            encoding,
            exec,
            metrics,
            device_limit,
            kept_on_host,
            ..
        } = self;
        // On the device: the key as 8-byte images and the table over it.
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        let bytes = rows.saturating_mul(8) + crate::device_budget::table_bytes(rows, 1, 0);
        let table_on = claim_build(device_limit, bytes, &kept_on_host);
        let inline = exec.backend.batching().is_none();
        let build = move || {
            build_side(
                &schema,
                &batches,
                &encoding,
                &exec,
                &metrics,
                reservation,
                table_on,
            )
        };
        if inline {
            return build();
        }
        tokio::task::spawn_blocking(build)
            .await
            .map_err(|e| DataFusionError::External(Box::new(e)))?
    }
}

/// Where a build side whose device state is `bytes` builds its table: on the join's
/// backend, holding its claim on the device budget under `limit` (nothing claimed without
/// one), or on the CPU when the budget refuses it, counted in `kept_on_host`.
fn claim_build(
    limit: Option<usize>,
    bytes: usize,
    kept_on_host: &datafusion::physical_plan::metrics::Count,
) -> TableOn {
    let Some(limit) = limit else {
        return TableOn::Backend(None);
    };
    let mut claim = crate::DeviceBudget::global().claim();
    if claim.try_grow(bytes, limit) {
        TableOn::Backend(Some(claim))
    } else {
        kept_on_host.add(1);
        TableOn::Cpu
    }
}

/// Where a build side's table is built.
#[derive(Debug)]
enum TableOn {
    /// On the join's backend (a device where there is one), with the side's claim on the
    /// device budget, which lives as long as the side does.
    Backend(Option<crate::DeviceClaim>),
    /// On the CPU: the side must not take device memory (the device budget refused
    /// it, or the device ran out); probes then use the CPU table.
    Cpu,
}

/// The build side of `batches`: one batch, its device key column and the backend's
/// table over it.
fn build_side(
    schema: &SchemaRef,
    batches: &[RecordBatch],
    encoding: &JoinKeys,
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    reservation: MemoryReservation,
    table_on: TableOn,
) -> Result<Arc<BuildSide>> {
    let started = Instant::now();
    let batch = concat_batches(schema, batches)?;
    let (key_column, dictionary) = build_keys(encoding, &batch)?;
    let (table, claim) = match table_on {
        TableOn::Backend(claim) => (
            exec.run(metrics, |backend, stream| {
                oxidelake_device::edge::build_join_table(backend, stream, &key_column)
            })?,
            claim,
        ),
        TableOn::Cpu => {
            let table =
                oxidelake_device::edge::build_join_table(&exec.cpu, &exec.cpu_stream, &key_column)
                    .map_err(DataFusionError::from)?;
            (table, None)
        }
    };
    // A table the CPU built after all (a device that failed) holds no device memory.
    let claim = claim.filter(|_| table.device() != oxidelake_core::DeviceId::CPU);
    // Device memory is not the host pool's; a table on the host is.
    let host_table = if table.device() == oxidelake_core::DeviceId::CPU {
        table.allocated_bytes()
    } else {
        0
    };
    // Each allocation once: one build batch is handed on as it is, and a batch read back
    // from a spill file shares one chunk among all its buffers (`build_memory`).
    reservation.try_resize(
        datafusion::common::utils::memory::get_record_batch_memory_size(&batch)
            + key_column.get_array_memory_size()
            + host_table,
    )?;
    record_build(metrics, table.allocated_bytes(), batch.num_rows(), started);
    Ok(Arc::new(BuildSide {
        width: batch.num_columns(),
        host: std::sync::OnceLock::from(batch),
        device: None,
        keyed: Some(table),
        key_column,
        device_keys: None,
        device_digits: None,
        dictionary,
        cpu_table: std::sync::OnceLock::new(),
        reservation,
        _device_claim: claim,
    }))
}

/// Counts a built side in `metrics`: its table's bytes, its rows, the time since
/// `started`.
fn record_build(metrics: &OperatorMetrics, table_bytes: usize, rows: usize, started: Instant) {
    metrics.telemetry.set_allocated_bytes(table_bytes as u64);
    metrics.rows_in.add(rows);
    metrics
        .baseline
        .elapsed_compute()
        .add_duration(started.elapsed());
}

/// Whether `indices` is exactly `0, 1, ..., rows - 1`.
fn is_identity(indices: &UInt32Array, rows: usize) -> bool {
    indices.len() == rows
        && indices.null_count() == 0
        && indices
            .values()
            .iter()
            .enumerate()
            .all(|(i, v)| *v as usize == i)
}

/// What probing one partition needs ([`GpuHashJoinExec::probing`]).
struct Probing {
    exec: Arc<ExecBackend>,
    metrics: Arc<OperatorMetrics>,
    join: Arc<ProbeSpec>,
    schema: SchemaRef,
    build: BoxFuture<'static, Result<Arc<BuildSide>>>,
}

/// What each probe batch needs besides the build side.
#[derive(Debug)]
struct ProbeSpec {
    keys: JoinKeys,
    filter: Option<JoinFilter>,
    join_type: JoinType,
    projection: Option<Vec<usize>>,
}

fn probe_batch(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    side: &BuildSide,
    batch: &RecordBatch,
    join: &ProbeSpec,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let started = Instant::now();
    let key_column = probe_keys(&join.keys, side.dictionary.as_ref(), batch)?;
    let keys = &key_column;
    let probed = probe_rows(join);
    let on_cpu = |table: &JoinTable| {
        oxidelake_device::edge::probe_join_table(&exec.cpu, &exec.cpu_stream, table, keys, probed)
            .map_err(DataFusionError::from)
    };
    let matches = match &side.keyed {
        Some(table) if table.device() == exec.backend.device() => {
            let on_device = exec.run_on_device(metrics, |backend, stream| {
                oxidelake_device::edge::probe_join_table(backend, stream, table, keys, probed)
            })?;
            match on_device {
                Some(matches) => matches,
                // The device refused or failed this probe: a CPU copy of the table.
                None => on_cpu(side.cpu_table(exec)?)?,
            }
        }
        // The table fell back to the CPU when it was built; probe it there too.
        Some(table) => {
            metrics.cpu_fallback_batches.add(1);
            on_cpu(table)?
        }
        // A batch the device refused beside a side built there.
        None => on_cpu(side.cpu_table(exec)?)?,
    };
    let (build_indices, probe_indices) = match &join.filter {
        Some(filter) => residual::filter_pairs(
            filter,
            side.host_batch(exec)?,
            batch,
            &matches.build_indices,
            &matches.probe_indices,
        )?,
        None => (matches.build_indices, matches.probe_indices),
    };
    let (build_indices, probe_indices) = if join.join_type == JoinType::Right {
        with_unmatched_probe_rows(&build_indices, &probe_indices, batch.num_rows())?
    } else {
        (build_indices, probe_indices)
    };
    if !matches!(join.join_type, JoinType::Inner | JoinType::Right) {
        let out = semi_or_anti(
            batch,
            &probe_indices,
            probed,
            join.join_type,
            join.projection.as_deref(),
            schema,
        )?;
        let moved = exec.bytes_moved(|| keys.get_array_memory_size());
        metrics.record(batch.num_rows(), out.num_rows(), started, moved);
        return Ok(out);
    }
    let build_width = side.width;
    let all: Vec<usize>;
    let wanted = match &join.projection {
        Some(projection) => projection.as_slice(),
        None => {
            all = (0..build_width + batch.num_columns()).collect();
            &all
        }
    };
    // Every probe row matched exactly once, in order (a foreign-key join): the probe
    // columns are the output columns, no copy needed.
    let probe_as_is = is_identity(&probe_indices, batch.num_rows());
    let build = if wanted.iter().any(|i| *i < build_width) {
        Some(side.host_batch(exec)?)
    } else {
        None
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(wanted.len());
    for i in wanted {
        columns.push(if let Some(build) = build.filter(|_| *i < build_width) {
            take(build.column(*i).as_ref(), &build_indices, None)?
        } else {
            let column = batch.columns().get(i - build_width).ok_or_else(|| {
                DataFusionError::Internal(format!("join projection index {i} out of range"))
            })?;
            if probe_as_is {
                Arc::clone(column)
            } else {
                take(column.as_ref(), &probe_indices, None)?
            }
        });
    }
    let out = RecordBatch::try_new(Arc::clone(schema), columns)?;
    let moved = exec.bytes_moved(|| keys.get_array_memory_size());
    metrics.record(batch.num_rows(), out.num_rows(), started, moved);
    Ok(out)
}

/// The pairs of a right outer join: every pair, and for each probe row without one, the
/// row with a NULL build index (`take` makes its build columns NULL). Output is in probe
/// order, each row's pairs in the order they came: a direct fill when each probe row has
/// at most one pair, a merge otherwise. Both backends give their pairs in probe order
/// (the plan properties rely on it too); pairs out of that order are an internal error.
fn with_unmatched_probe_rows(
    build_indices: &UInt32Array,
    probe_indices: &UInt32Array,
    probe_rows: usize,
) -> Result<(UInt32Array, UInt32Array)> {
    let (builds, probes) = (build_indices.values(), probe_indices.values());
    if let Some(&p) = probes.iter().find(|p| **p as usize >= probe_rows) {
        return Err(DataFusionError::Internal(format!(
            "join probe returned row {p} of a {probe_rows}-row batch"
        )));
    }
    if probes.windows(2).all(|w| w[0] < w[1]) {
        // At most one pair per probe row (a unique build key, the usual left join):
        // one output row per probe row, the probe side as it is.
        let mut build_out = vec![0u32; probe_rows];
        let mut valid = arrow::array::BooleanBufferBuilder::new(probe_rows);
        valid.append_n(probe_rows, false);
        for (b, p) in builds.iter().zip(probes) {
            build_out[*p as usize] = *b;
            valid.set_bit(*p as usize, true);
        }
        let nulls = arrow::buffer::NullBuffer::new(valid.finish());
        return Ok((
            UInt32Array::new(build_out.into(), Some(nulls)),
            UInt32Array::from_iter_values(0..probe_rows as u32),
        ));
    }
    if !probes.windows(2).all(|w| w[0] <= w[1]) {
        return Err(DataFusionError::Internal(
            "join probe returned its pairs out of probe order".into(),
        ));
    }
    // Pairs in probe order (what both backends produce): one merge pass.
    let mut build_out: Vec<u32> = Vec::with_capacity(builds.len() + probe_rows);
    let mut valid: Vec<bool> = Vec::with_capacity(builds.len() + probe_rows);
    let mut probe_out: Vec<u32> = Vec::with_capacity(builds.len() + probe_rows);
    let mut pair = 0;
    for row in 0..probe_rows as u32 {
        let first = pair;
        while pair < probes.len() && probes[pair] == row {
            build_out.push(builds[pair]);
            valid.push(true);
            probe_out.push(row);
            pair += 1;
        }
        if pair == first {
            build_out.push(0);
            valid.push(false);
            probe_out.push(row);
        }
    }
    let nulls = arrow::buffer::NullBuffer::from(valid);
    Ok((
        UInt32Array::new(build_out.into(), Some(nulls)),
        UInt32Array::from(probe_out),
    ))
}

/// The rows a probe asks for: a semi or anti join without a join filter needs only which
/// probe rows match, every other join the pairs.
fn probe_rows(join: &ProbeSpec) -> ProbeRows {
    match (join.join_type, &join.filter) {
        (JoinType::RightSemi, None) => ProbeRows::Matched,
        (JoinType::RightAnti, None) => ProbeRows::Unmatched,
        _ => ProbeRows::Pairs,
    }
}

/// The probe rows with at least one match (RightSemi) or none (RightAnti), in order:
/// `probe_indices` themselves where the probe chose them (`probed`), or the rows
/// with (without) a pair among them.
fn semi_or_anti(
    batch: &RecordBatch,
    probe_indices: &UInt32Array,
    probed: ProbeRows,
    join_type: JoinType,
    projection: Option<&[usize]>,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    let batch = match projection {
        Some(projection) => batch.project(projection)?,
        None => batch.clone(),
    };
    if probed != ProbeRows::Pairs {
        let kept = arrow::compute::take_record_batch(&batch, probe_indices)?;
        return Ok(RecordBatch::try_new(
            Arc::clone(schema),
            kept.columns().to_vec(),
        )?);
    }
    let mut matched = vec![false; batch.num_rows()];
    for p in probe_indices.values() {
        let slot = matched.get_mut(*p as usize).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "join probe returned row {p} of a {}-row batch",
                batch.num_rows()
            ))
        })?;
        *slot = true;
    }
    let keep = join_type == JoinType::RightSemi;
    let mask = BooleanArray::new(
        arrow::buffer::BooleanBuffer::collect_bool(matched.len(), |i| matched[i] == keep),
        None,
    );
    let kept = filter_record_batch(&batch, &mask)?;
    Ok(RecordBatch::try_new(
        Arc::clone(schema),
        kept.columns().to_vec(),
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmatched_probe_rows_are_added_once_in_probe_order_and_pairs_out_of_it_are_refused() {
        // Probe rows 0..5: row 1 has two pairs, row 3 one, rows 0, 2 and 4 none.
        let (b, p) = with_unmatched_probe_rows(
            &UInt32Array::from(vec![7, 8, 9]),
            &UInt32Array::from(vec![1, 1, 3]),
            5,
        )
        .unwrap();
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            vec![None, Some(7), Some(8), None, Some(9), None]
        );
        assert_eq!(p.values().to_vec(), vec![0, 1, 1, 2, 3, 4]);
        let unordered = with_unmatched_probe_rows(
            &UInt32Array::from(vec![9, 7, 8]),
            &UInt32Array::from(vec![3, 1, 1]),
            5,
        );
        assert!(unordered.is_err());
        // At most one pair per probe row: one output row each, probe rows as they are.
        let (b, p) = with_unmatched_probe_rows(
            &UInt32Array::from(vec![7, 9]),
            &UInt32Array::from(vec![1, 3]),
            5,
        )
        .unwrap();
        assert_eq!(
            b.iter().collect::<Vec<_>>(),
            vec![None, Some(7), None, Some(9), None]
        );
        assert_eq!(p.values().to_vec(), vec![0, 1, 2, 3, 4]);
        let out_of_range =
            with_unmatched_probe_rows(&UInt32Array::from(vec![0]), &UInt32Array::from(vec![5]), 5);
        assert!(out_of_range.is_err());
    }
}
