//! One grace join step: collect the build side if it fits, else split both sides into
//! pairs of spill files (or, when the device limit rather than the pool refused it, of
//! parts held in host memory) and join each pair the same way, one level deeper.

use std::sync::{Arc, Mutex};

use arrow::record_batch::RecordBatch;
use datafusion::common::utils::memory::RecordBatchMemoryCounter;
use datafusion::datasource::memory::MemorySourceConfig;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryLimit, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, SpillFile, TaskContext};
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_plan::joins::{HashJoinExec, PartitionMode};
use datafusion::physical_plan::metrics::{
    Count, ExecutionPlanMetricsSet, Gauge, MetricBuilder, SpillMetrics,
};
use datafusion::physical_plan::spill::SpillManager;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use datafusion::physical_plan::{EmptyRecordBatchStream, ExecutionPlan};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::PairJoin;
use super::build_cost::{build_cost, device_build_cost};
use super::handover::HandoverPool;
use super::null_keys::{NullKeyRows, without_null_keys};
use super::partitioned::SpillSet;
use super::side::Side;
use super::tiered::TieredWriter;
use super::{FAN_OUT, MAX_DEPTH};
use crate::device_budget::{DeviceBudget, DeviceClaim};

/// The two inputs of one step.
pub(super) struct GraceInput {
    pub(super) left: SendableRecordBatchStream,
    pub(super) right: SendableRecordBatchStream,
}

/// What every step of one output partition shares.
pub(super) struct JoinSpec {
    join: Arc<HashJoinExec>,
    /// What joins pairs on a device; their build sides are claimed from the device
    /// budget, up to `device_limit`.
    pairs: Option<Arc<dyn PairJoin>>,
    device_limit: Option<usize>,
    /// Splits the device budget caused where the memory pool had room.
    device_splits: Count,
    /// Bytes of those splits' parts held in host memory rather than written to disk.
    held_in_host: Count,
    /// Build sides split into [`FAN_OUT`] pairs, for the pool or the device budget.
    splits: Count,
    /// The deepest split level whose pairs were joined (0: nothing was split).
    split_depth: Gauge,
    /// Rows dropped because their join key held a NULL (`null_keys`).
    null_keys_dropped: Count,
    /// The build side's key expressions and what happens to its NULL-key rows.
    left_keys: Vec<PhysicalExprRef>,
    left_null_keys: NullKeyRows,
    /// The operator's metrics, which adopt the pair joins' device metrics.
    metrics: ExecutionPlanMetricsSet,
    partition: usize,
    context: Arc<TaskContext>,
    spill_metrics: SpillMetrics,
    /// Reads spill files back (DataFusion's reader: the IPC stream format, off the
    /// polling thread, two batches ahead). One per side, for the schemas.
    left_reader: SpillManager,
    right_reader: SpillManager,
}

impl JoinSpec {
    pub(super) fn new(
        join: Arc<HashJoinExec>,
        pairs: Option<Arc<dyn PairJoin>>,
        device_limit: Option<usize>,
        partition: usize,
        context: Arc<TaskContext>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Self {
        let device_splits = MetricBuilder::new(metrics).counter("device_budget_splits", partition);
        let held_in_host = MetricBuilder::new(metrics).counter("held_in_host_bytes", partition);
        let splits = MetricBuilder::new(metrics).counter("grace_splits", partition);
        let split_depth = MetricBuilder::new(metrics).gauge("grace_split_depth", partition);
        let null_keys_dropped =
            MetricBuilder::new(metrics).counter("null_key_rows_dropped", partition);
        let spill_metrics = SpillMetrics::new(metrics, partition);
        let reader =
            |schema| SpillManager::new(context.runtime_env(), spill_metrics.clone(), schema);
        Self {
            left_reader: reader(join.left().schema()),
            right_reader: reader(join.right().schema()),
            left_keys: join.on().iter().map(|(l, _)| Arc::clone(l)).collect(),
            left_null_keys: NullKeyRows::of(&join, Side::Left),
            join,
            pairs,
            device_limit,
            device_splits,
            held_in_host,
            splits,
            split_depth,
            null_keys_dropped,
            metrics: metrics.clone(),
            partition,
            spill_metrics,
            context,
        }
    }

    /// The device limit, when pairs run on a device under one.
    fn device_limit(&self) -> Option<usize> {
        self.pairs.as_ref().and(self.device_limit)
    }

    /// What the pair join will hold for `batch`: the stock join's [`build_cost`], or the
    /// GPU join's [`device_build_cost`].
    fn build_cost(&self, counter: &mut RecordBatchMemoryCounter, batch: &RecordBatch) -> usize {
        match self.pairs {
            None => build_cost(counter, batch),
            Some(_) => device_build_cost(counter, batch),
        }
    }

    /// `batch` without the build rows whose key holds a NULL where the join never emits
    /// them (`null_keys`): they are neither held nor partitioned.
    fn drop_null_build_keys(&self, batch: RecordBatch) -> Result<RecordBatch> {
        if self.left_null_keys != NullKeyRows::Dropped {
            return Ok(batch);
        }
        let (kept, dropped) = without_null_keys(batch, &self.left_keys)?;
        self.null_keys_dropped.add(dropped);
        Ok(kept)
    }

    /// Counts a split at level `depth`, whose pairs are joined one level deeper.
    fn count_split(&self, depth: u32) {
        self.splits.add(1);
        self.split_depth.set_max(
            usize::try_from(depth)
                .unwrap_or(usize::MAX)
                .saturating_add(1),
        );
    }

    fn reservation(&self, depth: u32) -> MemoryReservation {
        MemoryConsumer::new(format!(
            "GraceHashJoinExec[{}] build (level {depth})",
            self.partition
        ))
        .with_can_spill(true)
        .register(self.context.memory_pool())
    }

    /// The join (CollectLeft) of `build` with the `probe` stream, its build reservation
    /// served first from `held` (what the step reserved for `build`): the stock join, or
    /// the device pair join when `device` holds the build side's device claim.
    fn join_in_memory(
        &self,
        build: Vec<(RecordBatch, usize)>,
        held: MemoryReservation,
        device: Option<DeviceClaim>,
        probe: SendableRecordBatchStream,
    ) -> Result<BoxStream<'static, Result<RecordBatch>>> {
        let build = build.into_iter().map(|(batch, _)| batch).collect();
        let left = MemorySourceConfig::try_new_exec(&[build], self.join.left().schema(), None)?;
        let right = Arc::new(StreamingTableExec::try_new(
            self.join.right().schema(),
            vec![Arc::new(OnceStream::new(self.join.right().schema(), probe))
                as Arc<dyn PartitionStream>],
            None,
            Vec::new(),
            false,
            None,
        )?);
        let join = self
            .join
            .builder()
            .with_new_children(vec![left, right])?
            .with_partition_mode(PartitionMode::CollectLeft)
            .reset_state()
            .recompute_properties()
            .build()?;
        let plan = match (&self.pairs, &device) {
            (Some(pairs), Some(_)) => pairs.plan(join)?,
            _ => Arc::new(join),
        };
        let context = HandoverPool::context(&self.context, held, device);
        let stream = plan.execute(0, context)?;
        self.adopt_device_metrics(&plan);
        Ok(stream.boxed())
    }

    /// Registers the metrics of `plan` (a pair join, just executed) that say where it ran
    /// as this operator's own, so that EXPLAIN ANALYZE and `oxide tui` show whether the
    /// pairs ran on the device or fell back to the CPU.
    fn adopt_device_metrics(&self, plan: &Arc<dyn ExecutionPlan>) {
        if let Some(metrics) = plan.metrics() {
            for metric in metrics.iter() {
                if DEVICE_METRICS.contains(&metric.value().name()) {
                    self.metrics.register(Arc::clone(metric));
                }
            }
        }
        for child in plan.children() {
            self.adopt_device_metrics(child);
        }
    }

    fn read(
        &self,
        side: Side,
        file: Option<Arc<dyn SpillFile>>,
    ) -> Result<SendableRecordBatchStream> {
        let reader = match side {
            Side::Left => &self.left_reader,
            Side::Right => &self.right_reader,
        };
        match file {
            Some(file) => reader.read_spill_as_stream(file, None),
            None => Ok(Box::pin(EmptyRecordBatchStream::new(Arc::clone(
                reader.schema(),
            )))),
        }
    }
}

/// The metrics of a GPU operator that say where its batches ran (`exec_support`).
const DEVICE_METRICS: [&str; 4] = [
    "no_device",
    "cpu_fallback_batches",
    "device_errors",
    "bytes_moved",
];

/// The join of `input` at split level `depth`, as a stream of output batches.
pub(super) fn grace(
    spec: Arc<JoinSpec>,
    input: GraceInput,
    depth: u32,
) -> BoxStream<'static, Result<RecordBatch>> {
    futures::stream::once(step(spec, input, depth))
        .try_flatten()
        .boxed()
}

async fn step(
    spec: Arc<JoinSpec>,
    input: GraceInput,
    depth: u32,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    let GraceInput { mut left, right } = input;
    let reservation = spec.reservation(depth);
    // The build side's claim on the device budget, when pairs run on a device.
    let mut device = spec.pairs.as_ref().map(|_| DeviceBudget::global().claim());
    let mut counter = RecordBatchMemoryCounter::new();
    // Each batch with what it added to the reservation.
    let mut build: Vec<(RecordBatch, usize)> = Vec::new();
    let overflow = loop {
        let Some(batch) = left.try_next().await? else {
            break None;
        };
        let batch = spec.drop_null_build_keys(batch)?;
        if batch.num_rows() == 0 {
            continue;
        }
        let cost = spec.build_cost(&mut counter, &batch);
        if reservation.try_grow(cost).is_err() {
            break Some((batch, cost, Split::ForMemory));
        }
        if let (Some(claim), Some(limit)) = (device.as_mut(), spec.device_limit())
            && !claim.try_grow(cost, limit)
        {
            spec.device_splits.add(1);
            reservation.shrink(cost);
            break Some((batch, cost, Split::ForDevice));
        }
        build.push((batch, cost));
    };
    let Some((overflow, overflow_cost, split)) = overflow else {
        // It fits: the pair join takes the reserved bytes over as it builds.
        return spec.join_in_memory(build, reservation, device, right);
    };
    // Whatever happens next, this build side is not going to the device as it is.
    drop(device);
    if depth >= MAX_DEPTH {
        // Three splits did not make this pair fit, but the pool may be full of other
        // operators' bytes rather than the pair being too big: join it anyway if it fits
        // the limit on its own.
        let limit = match spec.context.memory_pool().memory_limit() {
            MemoryLimit::Finite(bytes) => bytes,
            MemoryLimit::Infinite | MemoryLimit::Unknown => usize::MAX,
        };
        reservation.grow(overflow_cost);
        build.push((overflow, overflow_cost));
        while reservation.size() <= limit {
            let Some(batch) = left.try_next().await? else {
                tracing::warn!(
                    partition = spec.partition,
                    bytes = reservation.size(),
                    "grace join: a part still beyond the free memory after {MAX_DEPTH} splits; \
                     joining it in memory past the free bytes of the pool"
                );
                // With the stock join: a part that did not fit is not sent to a device.
                return spec.join_in_memory(build, reservation, None, right);
            };
            let batch = spec.drop_null_build_keys(batch)?;
            let cost = spec.build_cost(&mut counter, &batch);
            reservation.grow(cost);
            build.push((batch, cost));
        }
        return Err(DataFusionError::ResourcesExhausted(format!(
            "GraceHashJoinExec[{}]: after splitting the build side {MAX_DEPTH} times \
             ({FAN_OUT} ways each) one part still needs more than the whole memory limit \
             ({limit} bytes); a join key with that many rows cannot be split further. \
             Raise the memory limit.",
            spec.partition
        )));
    }
    let seed = split_seed(depth);
    spec.count_split(depth);
    if split == Split::ForDevice {
        // The pool had room for what was collected: the parts go to host memory first.
        reservation.free();
        drop(reservation);
        build.push((overflow, overflow_cost));
        return split_for_device(spec, build, left, right, depth, seed).await;
    }
    tracing::debug!(
        partition = spec.partition,
        depth,
        held = reservation.size(),
        "grace join: build side beyond the memory limit; spilling"
    );
    let mut left_files = SpillSet::new(
        &spec.context,
        Side::Left,
        seed,
        &spec.join,
        &spec.spill_metrics,
        &spec.null_keys_dropped,
    )?;
    for (batch, cost) in build.drain(..) {
        left_files.write(&batch)?;
        reservation.shrink(cost.min(reservation.size()));
    }
    drop(reservation);
    left_files.write(&overflow)?;
    while let Some(batch) = left.try_next().await? {
        left_files.write(&batch)?;
    }
    let left_files = left_files.finish()?;

    let mut right = right;
    let mut right_files = SpillSet::new(
        &spec.context,
        Side::Right,
        seed,
        &spec.join,
        &spec.spill_metrics,
        &spec.null_keys_dropped,
    )?;
    while let Some(batch) = right.try_next().await? {
        right_files.write(&batch)?;
    }
    let right_files = right_files.finish()?;

    let pairs = left_files
        .into_iter()
        .zip(right_files)
        .filter(|(l, r)| l.is_some() || r.is_some());
    let stream = futures::stream::iter(pairs).flat_map(move |(l, r)| {
        let input = spec.read(Side::Left, l).and_then(|left| {
            Ok(GraceInput {
                left,
                right: spec.read(Side::Right, r)?,
            })
        });
        match input {
            Ok(input) => grace(Arc::clone(&spec), input, depth + 1),
            Err(e) => futures::stream::once(async move { Err(e) }).boxed(),
        }
    });
    Ok(stream.boxed())
}

/// Splits a build side the device budget refused (and its probe side) into parts held
/// in host memory while the pool has room (`tiered`), then joins each pair one level
/// deeper.
async fn split_for_device(
    spec: Arc<JoinSpec>,
    build: Vec<(RecordBatch, usize)>,
    mut left: SendableRecordBatchStream,
    mut right: SendableRecordBatchStream,
    depth: u32,
    seed: u64,
) -> Result<BoxStream<'static, Result<RecordBatch>>> {
    tracing::debug!(
        partition = spec.partition,
        depth,
        "grace join: build side beyond the device limit; splitting it in host memory"
    );
    let mut parts = TieredWriter::new(
        &spec.context,
        &spec.join,
        seed,
        format!(
            "GraceHashJoinExec[{}] host tier (level {depth})",
            spec.partition
        ),
        spec.held_in_host.clone(),
        &spec.spill_metrics,
        &spec.null_keys_dropped,
    )?;
    for (batch, _) in build {
        parts.add(Side::Left, &batch).await?;
    }
    while let Some(batch) = left.try_next().await? {
        parts.add(Side::Left, &batch).await?;
    }
    while let Some(batch) = right.try_next().await? {
        parts.add(Side::Right, &batch).await?;
    }
    let parts = parts.finish();
    let pairs: Vec<usize> = (0..FAN_OUT).filter(|p| parts.has_rows(*p)).collect();
    let stream = futures::stream::iter(pairs).flat_map(move |p| {
        let input = GraceInput {
            left: parts.stream(Side::Left, p),
            right: parts.stream(Side::Right, p),
        };
        grace(Arc::clone(&spec), input, depth + 1)
    });
    Ok(stream.boxed())
}

/// Why a build side was split.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Split {
    /// The memory pool refused it: both sides go to disk.
    ForMemory,
    /// The device budget refused it while the pool had room: both sides go to host
    /// memory first ([`TieredWriter`]).
    ForDevice,
}

/// The hash seed of split level `depth`: a different one each level, so a pair split again
/// spreads over new files, and none equal to DataFusion's repartitioning seed.
fn split_seed(depth: u32) -> u64 {
    0x9E37_79B9_7F4A_7C15_u64.wrapping_mul(u64::from(depth) + 1)
}

/// A [`PartitionStream`] that hands out one stream once.
struct OnceStream {
    schema: arrow::datatypes::SchemaRef,
    stream: Mutex<Option<SendableRecordBatchStream>>,
}

impl OnceStream {
    /// `schema` is the plan's (`StreamingTableExec` wants it equal, metadata included).
    fn new(schema: arrow::datatypes::SchemaRef, stream: SendableRecordBatchStream) -> Self {
        Self {
            schema,
            stream: Mutex::new(Some(stream)),
        }
    }
}

impl std::fmt::Debug for OnceStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnceStream").finish_non_exhaustive()
    }
}

impl PartitionStream for OnceStream {
    fn schema(&self) -> &arrow::datatypes::SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let taken = self.stream.lock().ok().and_then(|mut slot| slot.take());
        taken.unwrap_or_else(|| {
            Box::pin(RecordBatchStreamAdapter::new(
                Arc::clone(&self.schema),
                futures::stream::once(async {
                    Err(DataFusionError::Internal(
                        "GraceHashJoinExec: a probe stream was executed twice".to_string(),
                    ))
                }),
            ))
        })
    }
}
