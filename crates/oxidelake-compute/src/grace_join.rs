//! `GraceHashJoinExec`: a partitioned hash join that spills to disk when its build side
//! does not fit the session's memory limit.
//!
//! DataFusion's `HashJoinExec` holds its whole build side in memory and fails with
//! `ResourcesExhausted` past the memory pool's limit (TPC-H Q18 at SF 1 under 128 MiB,
//! for one). Under a host memory limit the session wraps every Partitioned-mode hash
//! join in this operator (`GraceJoinRule` in `oxidelake-planner`). Output partition `i`:
//!
//! 1. collects left (build) partition `i`, reserving what the stock join will reserve for
//!    each batch (its buffers counted as the stock join counts them, plus a hash table
//!    entry a row) in a spillable reservation;
//! 2. if all of it fits, runs the stock join (CollectLeft) over the collected batches and
//!    the live right stream, handing it the reserved bytes as it builds (`handover`):
//!    the same join, the same rows, nothing written to disk;
//! 3. if a batch does not fit, spills: every build row, then every probe row, goes to one
//!    of [`FAN_OUT`] Arrow IPC files per side by a hash of its join keys, and each pair of
//!    files is joined in turn by the same steps, one level deeper (a pair too big for
//!    memory is split again with another hash seed, up to [`MAX_DEPTH`] levels).
//!
//! Rows that can match have equal keys, so they land in the same pair, and the union of
//! the pairs' results is the join's result for every join type. A row whose key holds a
//! NULL matches nothing (where NULL equals nothing): it is dropped before the build side
//! is collected or either side partitioned where the join never emits it (inner and semi
//! joins, the other side of outer and anti joins), and otherwise dealt to the parts in
//! turn and emitted unmatched in its pair (`null_keys`; a NULL hashes alike under every
//! seed, so hashed they would all share one part that no split could make smaller).
//! The hash seeds differ from the repartitioning one, so the rows of partition `i` spread
//! over all the files instead of a fraction of them.
//!
//! What a pair's build side will hold is counted as DataFusion's join counts it, each
//! allocation once: a batch read back from a spill file points into the chunk the reader
//! decoded, shared by all its buffers and its neighbours. The `grace_splits` and
//! `grace_split_depth` metrics say how many build sides were split and how deep, and
//! `null_key_rows_dropped` how many NULL-key rows never reached a pair.
//!
//! Not wrapped (the rule leaves them as they are): null-aware anti joins (`NOT IN`: one
//! NULL on the probe side empties the whole result, which no single pair can see) and
//! joins with a pushed-down `fetch` (each pair would return up to the limit).
//!
//! **On a device.** When the planner places the join for a GPU, the pairs (and a build
//! side that fits) are joined by the GPU join instead of the stock one ([`PairJoin`],
//! shown as `pairs=GpuHashJoinExec[cuda]` in EXPLAIN). Their build sides then also claim
//! the process-wide [`crate::DeviceBudget`] up to `oxidelake.memory.device_limit`: a build
//! side past the device budget is split like one past the memory pool, counted in the
//! `device_budget_splits` metric, so a join of any size reaches the device in parts that
//! fit. Such a split keeps its parts in host memory first (`tiered`: through
//! `oxidelake_memory::SpillManager`, within half of the pool's free bytes, the
//! `held_in_host_bytes` metric) and demotes them to Arrow IPC files only past that, where
//! a split for the memory pool writes both sides to disk. A part still too big after
//! [`MAX_DEPTH`] splits is joined on the CPU by the stock join.
//!
//! The spill files, and the parts demoted to disk, count in the operator's `spill_count`,
//! `spilled_bytes` and `spilled_rows` metrics, which EXPLAIN ANALYZE prints and the
//! runtime adds to the telemetry hub's spill counters. Spilling breaks the probe side's row order, so the
//! operator claims no output ordering.

mod build_cost;
mod handover;
mod null_keys;
mod partitioned;
mod run;
mod side;
mod tiered;

use std::fmt;
use std::sync::Arc;

use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::{ExecutionPlanMetricsSet, MetricsSet};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, InputDistributionRequirements, PlanProperties,
    Statistics, StatisticsArgs, statistics::ChildStats,
};
use futures::TryStreamExt;

use run::{GraceInput, JoinSpec};

/// Files per side when a build side is spilled: a build side up to about this many times
/// the memory it was granted is joined without a second split.
pub const FAN_OUT: usize = 32;

/// How many times a pair of files may be split again before the join gives up (a single
/// key with more rows than memory holds cannot be split by any hash).
pub const MAX_DEPTH: u32 = 3;

/// How the joins of the pairs (and of a build side that fits) run, when not as the stock
/// join: the planner's placement, e.g. on a GPU.
pub trait PairJoin: fmt::Debug + Send + Sync {
    /// The plan that joins `join`'s inputs: `join` is the stock join in CollectLeft mode
    /// over one pair's build rows and probe stream.
    fn plan(&self, join: HashJoinExec) -> Result<Arc<dyn ExecutionPlan>>;

    /// Its name in EXPLAIN, e.g. `GpuHashJoinExec[cuda]`.
    fn label(&self) -> String;
}

/// A Partitioned-mode hash join that joins through spill files when its build side does
/// not fit in the memory pool; see the module documentation.
#[derive(Debug)]
pub struct GraceHashJoinExec {
    /// The stock join this operator stands for (its inputs are this operator's children).
    join: Arc<HashJoinExec>,
    /// What joins the pairs on a device, when not the stock join.
    pairs: Option<Arc<dyn PairJoin>>,
    /// `oxidelake.memory.device_limit`: bytes the process's claims on the
    /// [`crate::DeviceBudget`] may reach when pairs run on a device (`None`: no limit).
    device_limit: Option<usize>,
    properties: Arc<PlanProperties>,
    metrics: ExecutionPlanMetricsSet,
}

impl GraceHashJoinExec {
    /// Wraps `join`, which must be a Partitioned-mode join that is not null-aware and has
    /// no `fetch` ([`GraceHashJoinExec::can_wrap`]).
    pub fn try_new(join: Arc<HashJoinExec>) -> Result<Self> {
        if let Some(reason) = Self::refusal(&join) {
            return Err(DataFusionError::Plan(format!(
                "GraceHashJoinExec cannot stand for this join: {reason}"
            )));
        }
        // Pairs of spill files are joined one after another, so the probe side's order
        // does not survive a spill: no output ordering is claimed.
        let mut eq_properties = join.properties().eq_properties.clone();
        eq_properties.clear_orderings();
        let properties = PlanProperties::clone(join.properties()).with_eq_properties(eq_properties);
        Ok(Self {
            join,
            pairs: None,
            device_limit: None,
            properties: Arc::new(properties),
            metrics: ExecutionPlanMetricsSet::new(),
        })
    }

    /// Joins each pair (and a build side that fits) with `pairs` instead of the stock
    /// join: the planner's placement on a device.
    pub fn with_pairs(mut self, pairs: Arc<dyn PairJoin>) -> Self {
        self.pairs = Some(pairs);
        self
    }

    /// Bounds the build side of a pair joined on a device by the device budget:
    /// the process's claims may reach `limit` bytes.
    pub fn with_device_limit(mut self, limit: Option<usize>) -> Self {
        self.device_limit = limit;
        self
    }

    /// What joins the pairs on a device, if anything does.
    pub fn pairs(&self) -> Option<&Arc<dyn PairJoin>> {
        self.pairs.as_ref()
    }

    /// The device limit the build sides of device pairs count against.
    pub fn device_limit(&self) -> Option<usize> {
        self.device_limit
    }

    /// Whether `join` can be run by this operator.
    pub fn can_wrap(join: &HashJoinExec) -> bool {
        Self::refusal(join).is_none()
    }

    fn refusal(join: &HashJoinExec) -> Option<&'static str> {
        if *join.partition_mode() != PartitionMode::Partitioned {
            Some("only Partitioned-mode joins build from one partition's rows")
        } else if join.null_aware {
            Some("a null-aware anti join needs every probe row at once")
        } else if join.fetch().is_some() {
            Some("a join with a fetch limit would return the limit once per spilled pair")
        } else {
            None
        }
    }

    /// The stock join it stands for.
    pub fn join(&self) -> &Arc<HashJoinExec> {
        &self.join
    }
}

impl DisplayAs for GraceHashJoinExec {
    fn fmt_as(&self, t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GraceHashJoinExec: fan_out={FAN_OUT}, ")?;
        if let Some(pairs) = &self.pairs {
            write!(f, "pairs={}, ", pairs.label())?;
            if let Some(limit) = self.device_limit {
                write!(f, "device_limit={limit}, ")?;
            }
        }
        self.join.fmt_as(t, f)
    }
}

impl ExecutionPlan for GraceHashJoinExec {
    crate::exec_support::operator_basics!("GraceHashJoinExec");

    /// The stock join's estimate: the same rows come out.
    fn statistics_from_inputs(
        &self,
        input_stats: &[Arc<Statistics>],
        args: &StatisticsArgs,
    ) -> Result<Arc<Statistics>> {
        self.join.statistics_from_inputs(input_stats, args)
    }

    fn child_stats_requests(&self, partition: Option<usize>) -> Vec<ChildStats> {
        self.join.child_stats_requests(partition)
    }

    /// Both sides hash-partitioned on their keys, partition for partition, as the stock
    /// Partitioned join needs.
    fn input_distribution_requirements(&self) -> InputDistributionRequirements {
        self.join.input_distribution_requirements()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![self.join.left(), self.join.right()]
    }

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false, false]
    }

    fn apply_expressions(
        &self,
        f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        self.join.apply_expressions(f)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let join = self
            .join
            .builder()
            .with_new_children(children)?
            .reset_state()
            .build()?;
        let mut grace = Self::try_new(Arc::new(join))?.with_device_limit(self.device_limit);
        grace.pairs = self.pairs.clone();
        Ok(Arc::new(grace))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let input = GraceInput {
            left: self.join.left().execute(partition, Arc::clone(&context))?,
            right: self.join.right().execute(partition, Arc::clone(&context))?,
        };
        let spec = Arc::new(JoinSpec::new(
            Arc::clone(&self.join),
            self.pairs.clone(),
            self.device_limit,
            partition,
            context,
            &self.metrics,
        ));
        let stream = run::grace(spec, input, 0).inspect_ok({
            let output_rows = datafusion::physical_plan::metrics::MetricBuilder::new(&self.metrics)
                .output_rows(partition);
            move |batch| output_rows.add(batch.num_rows())
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(
            self.join.schema(),
            stream,
        )))
    }
}
