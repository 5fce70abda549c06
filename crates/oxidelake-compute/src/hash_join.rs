//! `GpuHashJoinExec`: inner, right-semi and right-anti equi-joins on one or more keys,
//! with an optional join filter.
//!
//! The left input is the build side: all of its partitions are collected once, shared by
//! every output partition, and indexed by the backend (`build_join_table`). Each right
//! (probe) partition then streams through `probe_join_table`; the join filter, if any,
//! drops the key-matched pairs it rejects (`residual`); an inner join gathers the
//! remaining pairs' rows of both sides with Arrow's `take`, a semi or anti join keeps the
//! probe rows with (or without) a pair. NULL keys never match. Keys other than one Int64
//! column are numbered on the host first (`keys`).
//!
//! Left semi and anti joins are not an operator mode: they emit build rows once every
//! probe partition has been seen, which needs a visited bitmap shared by all of them (and,
//! in a cluster, by tasks in other processes). The placement rule runs them as the right
//! semi / anti join with the inputs swapped instead.

mod keys;
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
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_plan::joins::utils::JoinFilter;
use datafusion::physical_plan::joins::{HashJoinExecBuilder, PartitionMode};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, InputDistributionRequirements,
    PlanProperties, collect_partitioned,
};
use futures::TryStreamExt;
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::JoinTable;

use crate::exec_support::{BackendChoice, ExecBackend, OperatorMetrics};
use crate::placement_label;
pub use keys::numbered_key_type;
use keys::{JoinKeys, KeyDictionary, build_keys, probe_keys};

/// The collected build side and its hash table.
#[derive(Debug)]
struct BuildSide {
    batch: RecordBatch,
    table: JoinTable,
    /// The device key column the table was built from.
    key_column: Int64Array,
    /// For numbered keys: the build keys' numbers, which probes look up.
    dictionary: Option<KeyDictionary>,
    /// A CPU copy of the table, built on first need: when the device fails a probe, the
    /// table it holds is unusable and the rest of the join probes this one.
    cpu_table: std::sync::OnceLock<JoinTable>,
}

impl BuildSide {
    /// The CPU table, built from the host copy of the build side once.
    fn cpu_table(&self, exec: &ExecBackend) -> Result<&JoinTable> {
        if let Some(table) = self.cpu_table.get() {
            return Ok(table);
        }
        use oxidelake_device::GpuBackend;
        let table = exec
            .cpu
            .build_join_table(&exec.cpu_stream, &self.key_column)
            .map_err(DataFusionError::from)?;
        Ok(self.cpu_table.get_or_init(|| table))
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
    placement: BackendKind,
    backend: BackendChoice,
    schema: SchemaRef,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
    build: Arc<tokio::sync::OnceCell<Arc<BuildSide>>>,
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

    /// A join of `join_type` (Inner, RightSemi or RightAnti; others are `Unsupported`) on
    /// the key column pairs `on`, each pair of one type ([`numbered_key_type`], or one
    /// Int64 pair), keeping only the pairs `filter` accepts. The filter's `Left` side is
    /// `left`.
    pub fn try_new_on(
        left: Arc<dyn ExecutionPlan>,
        right: Arc<dyn ExecutionPlan>,
        on: Vec<(usize, usize)>,
        filter: Option<JoinFilter>,
        join_type: JoinType,
        placement: BackendKind,
    ) -> Result<Self> {
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
        // The plan properties of the stock operator this one stands for: a HashJoinExec
        // in CollectLeft mode on the same keys and filter. It shifts the probe side's
        // partitioning and orderings past the build side's columns and knows the key
        // equivalences; both backends emit matches in probe-row order (the device writes
        // each probe row's pairs at its prefix-sum offset, the filter keeps their order),
        // so every claim holds here.
        let stock_on = on
            .iter()
            .map(|(l, r)| {
                (
                    Arc::new(Column::new(ls.field(*l).name(), *l)) as Arc<dyn PhysicalExpr>,
                    Arc::new(Column::new(rs.field(*r).name(), *r)) as Arc<dyn PhysicalExpr>,
                )
            })
            .collect();
        let stock =
            HashJoinExecBuilder::new(Arc::clone(&left), Arc::clone(&right), stock_on, join_type)
                .with_filter(filter.clone())
                .with_partition_mode(PartitionMode::CollectLeft)
                .with_null_equality(NullEquality::NullEqualsNothing)
                .build()?;
        let schema = stock.schema();
        let properties = stock.properties().as_ref().clone();
        Ok(Self {
            left,
            right,
            on,
            filter,
            join_type,
            placement,
            backend: BackendChoice::Detect,
            schema,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
            build: Arc::new(tokio::sync::OnceCell::new()),
        })
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

    /// Where the planner placed the operator.
    pub fn placement(&self) -> BackendKind {
        self.placement
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
                    "{}: join_type={}, on=[{}]",
                    placement_label("GpuHashJoinExec", self.placement),
                    self.join_type,
                    on.join(", ")
                )?;
                if let Some(filter) = &self.filter {
                    write!(f, ", filter={}", filter.expression())?;
                }
                Ok(())
            }
            DisplayFormatType::TreeRender => {
                write!(
                    f,
                    "placement={}\njoin_type={}",
                    self.placement, self.join_type
                )
            }
        }
    }
}

impl ExecutionPlan for GpuHashJoinExec {
    fn name(&self) -> &str {
        "GpuHashJoinExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    /// The build side as one partition (each output partition probes the whole build
    /// table, like DataFusion's CollectLeft mode); the probe side as it comes. Declaring
    /// it lets Ballista cut a stage below the build side, so every task builds from all
    /// of it and not just its own file split.
    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        InputDistributionRequirements::new(vec![
            Distribution::SinglePartition,
            Distribution::UnspecifiedDistribution,
        ])
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
        let exec = GpuHashJoinExec::try_new_on(
            left,
            right,
            self.on.clone(),
            self.filter.clone(),
            self.join_type,
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
        let probe = self.right.execute(partition, Arc::clone(&context))?;
        let exec = Arc::new(ExecBackend::new(&self.backend)?);
        let metrics = Arc::new(OperatorMetrics::new(
            &self.metrics,
            partition,
            "GpuHashJoinExec",
            exec.kind(),
        ));
        let left = Arc::clone(&self.left);
        let (build_encoding, probe_encoding) = self.key_encodings();
        let join = Arc::new(ProbeSpec {
            keys: probe_encoding,
            filter: self.filter.clone(),
            join_type: self.join_type,
        });
        let (once, schema) = (Arc::clone(&self.build), Arc::clone(&self.schema));
        let build_exec = Arc::clone(&exec);
        let build_metrics = Arc::clone(&metrics);
        let build = async move {
            once.get_or_try_init(|| async move {
                let started = Instant::now();
                let partitions = collect_partitioned(Arc::clone(&left), context).await?;
                let batches: Vec<RecordBatch> = partitions.into_iter().flatten().collect();
                let batch = concat_batches(&left.schema(), &batches)?;
                let (key_column, dictionary) = build_keys(&build_encoding, &batch)?;
                let table = build_exec.run(&build_metrics, |backend, stream| {
                    backend.build_join_table(stream, &key_column)
                })?;
                build_metrics
                    .telemetry
                    .set_allocated_bytes(table.allocated_bytes() as u64);
                build_metrics.rows_in.add(batch.num_rows());
                build_metrics
                    .baseline
                    .elapsed_compute()
                    .add_duration(started.elapsed());
                Ok::<_, DataFusionError>(Arc::new(BuildSide {
                    batch,
                    table,
                    key_column,
                    dictionary,
                    cpu_table: std::sync::OnceLock::new(),
                }))
            })
            .await
            .cloned()
        };
        let stream = futures::stream::once(async move {
            let side = build.await?;
            Ok::<_, DataFusionError>(probe.and_then(move |batch| {
                futures::future::ready(probe_batch(&exec, &metrics, &side, &batch, &join, &schema))
            }))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            Arc::clone(&self.schema),
            stream,
        )))
    }

    fn metrics(&self) -> Option<MetricsSet> {
        Some(self.metrics.clone_inner())
    }
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

/// What each probe batch needs besides the build side.
#[derive(Debug)]
struct ProbeSpec {
    keys: JoinKeys,
    filter: Option<JoinFilter>,
    join_type: JoinType,
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
    let on_device = if side.table.device() == exec.backend.device() {
        exec.run_on_device(metrics, |backend, stream| {
            backend.probe_join_table(stream, &side.table, keys)
        })?
    } else {
        None
    };
    let matches = if let Some(matches) = on_device {
        matches
    } else if side.table.device() == exec.backend.device() {
        // The device refused or failed this probe: probe a CPU copy of the table.
        use oxidelake_device::GpuBackend;
        exec.cpu
            .probe_join_table(&exec.cpu_stream, side.cpu_table(exec)?, keys)
            .map_err(DataFusionError::from)?
    } else {
        // The table fell back to the CPU when it was built; probe it there too.
        metrics.cpu_fallback_batches.add(1);
        use oxidelake_device::GpuBackend;
        exec.cpu
            .probe_join_table(&exec.cpu_stream, &side.table, keys)
            .map_err(DataFusionError::from)?
    };
    let (build_indices, probe_indices) = match &join.filter {
        Some(filter) => residual::filter_pairs(
            filter,
            &side.batch,
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
        let out = semi_or_anti(batch, &probe_indices, join.join_type, schema)?;
        let moved = exec.bytes_moved(|| keys.get_array_memory_size());
        metrics.record(batch.num_rows(), out.num_rows(), started, moved);
        return Ok(out);
    }
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(schema.fields().len());
    for column in side.batch.columns() {
        columns.push(take(column.as_ref(), &build_indices, None)?);
    }
    if is_identity(&probe_indices, batch.num_rows()) {
        // Every probe row matched exactly once, in order (a foreign-key join): the probe
        // columns are the output columns, no copy needed.
        columns.extend(batch.columns().iter().cloned());
    } else {
        for column in batch.columns() {
            columns.push(take(column.as_ref(), &probe_indices, None)?);
        }
    }
    let out = RecordBatch::try_new(Arc::clone(schema), columns)?;
    let moved = exec.bytes_moved(|| keys.get_array_memory_size());
    metrics.record(batch.num_rows(), out.num_rows(), started, moved);
    Ok(out)
}

/// The pairs of a right outer join: every pair, and for each probe row without one, the
/// row with a NULL build index (`take` makes its build columns NULL). Output is in probe
/// order, each row's pairs in the order they came (a counting sort on the probe index,
/// so it does not rely on how a backend orders its pairs).
fn with_unmatched_probe_rows(
    build_indices: &UInt32Array,
    probe_indices: &UInt32Array,
    probe_rows: usize,
) -> Result<(UInt32Array, UInt32Array)> {
    let mut counts = vec![0usize; probe_rows];
    for p in probe_indices.values() {
        *counts.get_mut(*p as usize).ok_or_else(|| {
            DataFusionError::Internal(format!(
                "join probe returned row {p} of a {probe_rows}-row batch"
            ))
        })? += 1;
    }
    // Each probe row takes max(pairs, 1) output slots, starting at its offset.
    let mut next = Vec::with_capacity(probe_rows);
    let mut total = 0;
    for c in &counts {
        next.push(total);
        total += (*c).max(1);
    }
    let mut build_out: Vec<Option<u32>> = vec![None; total];
    let mut probe_out: Vec<u32> = vec![0; total];
    for (row, c) in counts.iter().enumerate() {
        if *c == 0 {
            probe_out[next[row]] = row as u32;
        }
    }
    for (b, p) in build_indices.values().iter().zip(probe_indices.values()) {
        let slot = &mut next[*p as usize];
        build_out[*slot] = Some(*b);
        probe_out[*slot] = *p;
        *slot += 1;
    }
    Ok((UInt32Array::from(build_out), UInt32Array::from(probe_out)))
}

/// The probe rows with at least one match (RightSemi) or none (RightAnti), in order.
fn semi_or_anti(
    batch: &RecordBatch,
    probe_indices: &UInt32Array,
    join_type: JoinType,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
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
    let mask: BooleanArray = matched.iter().map(|m| Some(*m == keep)).collect();
    let kept = filter_record_batch(batch, &mask)?;
    Ok(RecordBatch::try_new(
        Arc::clone(schema),
        kept.columns().to_vec(),
    )?)
}
