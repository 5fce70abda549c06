//! `GpuHashJoinExec` over device batches (ADR-0014, stage 3; ADR-0015).
//!
//! Where both inputs hand on device batches (a GPU operator between transitions, below
//! the partition coalescing of a CollectLeft join, or an upload the transition rule put
//! there), the join is itself a segment operator (`gives_device_batches`): the build
//! batches are appended into one batch on the device and the table built over their key
//! images, only the key column crossing to the host (for the dynamic filter); each probe
//! batch's output is gathered from both sides on the device and handed on as a device
//! batch. A probe batch the device cannot join is refused in place: copied back, probed
//! by the host path against a CPU table over the side's keys (built on first need; the
//! build rows downloaded once) and its output left on the host (`refused_batches`); so
//! is a host batch the device failed below (`cpu_fallback_batches`). On the
//! CPU backend the batches are on the host ([`SegmentBatch`]): the side is built and
//! every batch probed by the host path.
//!
//! A join the device cannot run whole (another join type, a join filter, a key that is
//! not integer-like, a column a device batch cannot hold) reads host batches: the
//! transition rule leaves the download under its probe input, and the host path probes
//! through the host edge. There is no second way over device batches.
//!
//! **Device failures.** A probe batch the device fails is replayed on the CPU from its
//! origin and probed by the host path (against a CPU copy of the table); a build side
//! the device fails is built on the CPU from its batches' origins ([`crate::segment`]).
//! The batches a join built on the device hands on have no origin: a failure above it
//! fails the execution, and the session re-runs the query on the CPU before its first
//! row (ADR-0015).

use std::sync::Arc;
use std::time::Instant;

use arrow::array::Array;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::JoinType;
use datafusion::common::utils::memory::RecordBatchMemoryCounter;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::MemoryReservation;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::coalesce_partitions::CoalescePartitionsExec;
use datafusion::physical_plan::joins::PartitionMode;
use futures::TryStreamExt;
use oxidelake_core::EngineError;
use oxidelake_device::device_batch::{self, DeviceBatch};
use oxidelake_device::ops::{
    JoinArgs, JoinColumn, JoinKey, ProbeRows, RadixDigit, widened_to_int64,
};

use super::keys::{JoinKeys, KeyDictionary};
use super::radix::RadixKeys;
use super::{
    BuildInputs, BuildSide, GpuHashJoinExec, ProbeSpec, Probing, TableOn, build_side, probe_batch,
    record_build,
};
use crate::exec_support::{ExecBackend, OperatorMetrics};
use crate::segment::replay::{
    Replay, as_segment, is_device_failure, recover, refused, replay_below,
};
use crate::segment::{SegmentBatch, SegmentExec, SegmentStream, coalesce_host_items, each_batch};

/// One probe batch of a segment and what joining it needs.
struct SegmentProbe {
    exec: Arc<ExecBackend>,
    metrics: Arc<OperatorMetrics>,
    side: Arc<BuildSide>,
    /// The probe input (to replay a batch on the CPU).
    input: Arc<dyn ExecutionPlan>,
    join: Arc<ProbeSpec>,
    schema: SchemaRef,
}

impl SegmentProbe {
    /// The joined batch of `item` (module docs): on the device where both sides are
    /// (without an origin: the output depends on the device's build side), host rows for
    /// a host batch or for a device batch replayed on the CPU after the device failed it
    /// (or failed earlier in this execution).
    fn join(&self, item: SegmentBatch) -> Result<SegmentBatch> {
        // A host batch the device failed below, or a device batch replayed here after a
        // failure: its output stays on the CPU above.
        let failed = item.cpu_only || item.batch.on_device().is_some();
        let host = match item.batch.as_host() {
            Some(host) => {
                if item.cpu_only {
                    // Probed on the CPU table below, as every operator above a failure.
                    self.metrics.cpu_fallback_batches.add(1);
                }
                host.clone()
            }
            None => {
                let replay = Replay {
                    input: &self.input,
                    exec: &self.exec,
                    metrics: &self.metrics,
                    operator: "GpuHashJoinExec",
                };
                let joined =
                    replay.device_or_replayed(&item.batch, item.origin.as_deref(), |batch| {
                        join_device_batch(
                            &self.exec,
                            &self.metrics,
                            &self.side,
                            batch,
                            &self.join,
                            &self.schema,
                        )
                    })?;
                match joined {
                    Ok(out) => return Ok(SegmentBatch::new(out, None)),
                    Err(host) => host,
                }
            }
        };
        let out = probe_batch(
            &self.exec,
            &self.metrics,
            &self.side,
            &host,
            &self.join,
            &self.schema,
        )?;
        Ok(match failed {
            true => SegmentBatch::cpu_only(out),
            false => SegmentBatch::host(out),
        })
    }
}

impl GpuHashJoinExec {
    /// The plan whose device batches this join's build side can be built from: the
    /// input of a CollectLeft join's partition coalescing (or its single-partition left
    /// input), a Partitioned join's left input; each when it hands on device batches.
    fn device_build_source(&self) -> Option<Arc<dyn ExecutionPlan>> {
        let left = &self.left;
        let source = match self.mode {
            PartitionMode::Partitioned => Arc::clone(left),
            _ => match left.downcast_ref::<CoalescePartitionsExec>() {
                Some(coalesce) => Arc::clone(coalesce.input()),
                None if left.properties().partitioning.partition_count() == 1 => Arc::clone(left),
                None => return None,
            },
        };
        as_segment(&source).is_some().then_some(source)
    }

    /// Whether the join hands on device batches (stage 3, module docs): a join the
    /// device can run ([`Self::joins_on_device`]) whose probe and build inputs both hand
    /// on device batches.
    pub fn gives_device_batches(&self) -> bool {
        self.joins_on_device()
            && as_segment(&self.right).is_some()
            && self.device_build_source().is_some()
    }
}

impl SegmentExec for GpuHashJoinExec {
    fn execute_segment(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SegmentStream> {
        let (Some(probe), Some(source)) = (as_segment(&self.right), self.device_build_source())
        else {
            return Err(DataFusionError::Internal(
                "GpuHashJoinExec asked for device batches without device inputs".into(),
            ));
        };
        let batch_size = context.session_config().batch_size();
        let input = probe.execute_segment(partition, Arc::clone(&context))?;
        let exec = ExecBackend::on(Arc::clone(&input.backend), input.detected)?;
        let Probing {
            exec,
            metrics,
            join,
            schema,
            build,
        } = self.probing(partition, context, exec, Some(source));
        let batches = input.batches;
        let backend = Arc::clone(&input.backend);
        let probe = Arc::clone(&self.right);
        let joined = futures::stream::once(async move {
            let probing = SegmentProbe {
                exec,
                metrics,
                side: build.await?,
                input: probe,
                join,
                schema,
            };
            Ok::<_, DataFusionError>(each_batch(batches, backend.as_ref(), move |item| {
                probing.join(item)
            }))
        })
        .try_flatten();
        // Selective probes match few rows per batch: on the CPU backend they are merged,
        // as the host path merges its output.
        let kind = input.backend.kind();
        let batches =
            coalesce_host_items(Box::pin(joined), kind, Arc::clone(&self.schema), batch_size);
        Ok(SegmentStream {
            backend: input.backend,
            detected: input.detected,
            batches,
        })
    }

    /// Never asked: the join hands on its device batches without an origin, since their
    /// rows depend on the build side it holds on the device.
    fn replay(&self, _origin: &RecordBatch) -> Result<RecordBatch> {
        Err(DataFusionError::Internal(
            "a join built on the device has no batch to replay".into(),
        ))
    }
}

/// Collects the device batches of `source`'s `partitions` (concurrently) and builds the
/// side from them on the device; where the backend cannot (the CPU backend, a key or
/// column it does not hold as the kernels read it), from their host copies.
pub(super) async fn collect_and_build(
    inputs: BuildInputs,
    source: Arc<dyn ExecutionPlan>,
    partitions: Vec<usize>,
    context: Arc<TaskContext>,
    reservation: MemoryReservation,
) -> Result<Arc<BuildSide>> {
    let segment = as_segment(&source).ok_or_else(|| {
        DataFusionError::Internal("a device build side without device batches".into())
    })?;
    let streams = partitions
        .into_iter()
        .map(|p| segment.execute_segment(p, Arc::clone(&context)))
        .collect::<Result<Vec<_>>>()?;
    // What the collected items hold in host memory (host batches, and the origins kept
    // for a replay) is reserved item by item, so a build side past the memory limit
    // fails typed before it is all held.
    let held = Arc::new(reservation);
    let parts = futures::future::try_join_all(streams.into_iter().map(|stream| {
        let held = Arc::clone(&held);
        // Each allocation once, as `build_memory::collect_reserved` counts host batches.
        let mut counter = RecordBatchMemoryCounter::new();
        stream
            .batches
            .and_then(move |item| {
                let grown = held.try_grow(host_bytes(&item, &mut counter));
                async move { grown.map(|()| item) }
            })
            .try_collect::<Vec<SegmentBatch>>()
    }))
    .await?;
    let reservation = Arc::try_unwrap(held).map_err(|_| {
        DataFusionError::Internal("a build side's reservation still shared after collection".into())
    })?;
    let items: Vec<SegmentBatch> = parts.into_iter().flatten().collect();
    let schema = inputs.left.schema();
    let BuildInputs {
        encoding,
        exec,
        metrics,
        device_limit,
        kept_on_host,
        ..
    } = inputs;
    // Copies, kernels and the host build's device table block: off the runtime's workers.
    tokio::task::spawn_blocking(move || {
        let on_host = |host: &[RecordBatch], reservation, table_on| {
            build_side(
                &schema,
                host,
                &encoding,
                &exec,
                &metrics,
                reservation,
                table_on,
            )
        };
        let on_device = items.iter().all(|item| item.batch.on_device().is_some());
        if !on_device {
            // Host batches among them (the CPU backend's, or ones the device refused or
            // failed): the side is built from host batches.
            let host = host_batches(&exec, &metrics, &source, items)?;
            // As the host path claims: the key images and the table.
            let rows: usize = host.iter().map(RecordBatch::num_rows).sum();
            let bytes = rows * 8 + crate::device_budget::table_bytes(rows, 1, 0);
            let table_on = super::claim_build(device_limit, bytes, &kept_on_host);
            return on_host(&host, reservation, table_on);
        }
        let (batches, origins): (Vec<DeviceBatch>, Vec<Option<Arc<RecordBatch>>>) = items
            .into_iter()
            .map(|item| (item.batch, item.origin))
            .unzip();
        // The side's device bytes (its batches appended, then the table) claimed under
        // the limit; refused, the side is kept on the host.
        let rows: usize = batches.iter().map(DeviceBatch::num_rows).sum();
        let bytes = batches.iter().map(DeviceBatch::bytes).sum::<usize>()
            + crate::device_budget::table_bytes(rows, 1, 0);
        let table_on = super::claim_build(device_limit, bytes, &kept_on_host);
        // For a replay's build, should the device fail this one.
        let spare = reservation.new_empty();
        let built = match table_on {
            TableOn::Cpu => downloaded(&exec, &batches)
                .and_then(|host| on_host(&host, reservation, TableOn::Cpu)),
            TableOn::Backend(claim) => build_on_device(
                &schema,
                batches,
                &encoding,
                &exec,
                &metrics,
                reservation,
                claim,
            ),
        };
        match built {
            Ok(side) => Ok(side),
            Err(err) => {
                // The device failed the build: from the batches' origins, replayed on the
                // CPU, where every batch has one.
                let origins: Option<Vec<Arc<RecordBatch>>> = origins.into_iter().collect();
                let Some(origins) = origins.filter(|_| is_device_failure(&err)) else {
                    return Err(err);
                };
                tracing::warn!(
                    error = %err,
                    "the device failed a join's build; the side is built on the CPU from its \
                     batches replayed there"
                );
                exec.degrade();
                metrics.device_errors.add(1);
                let host = origins
                    .iter()
                    .map(|origin| replay_below(&source, origin))
                    .collect::<Result<Vec<_>>>()?;
                on_host(&host, spare, TableOn::Cpu)
            }
        }
    })
    .await
    .map_err(|e| DataFusionError::External(Box::new(e)))?
}

/// The host memory a segment item adds (a host batch's, or a device batch's origin),
/// each allocation counted once across the items `counter` has seen.
fn host_bytes(item: &SegmentBatch, counter: &mut RecordBatchMemoryCounter) -> usize {
    match (item.batch.as_host(), &item.origin) {
        (Some(batch), _) => counter.count_batch(batch),
        (None, origin) => origin.as_ref().map_or(0, |o| counter.count_batch(o)),
    }
}

/// The host form of each of `items` (a device batch copied back, or replayed on the CPU
/// from its origin where the copy fails).
fn host_batches(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    source: &Arc<dyn ExecutionPlan>,
    items: Vec<SegmentBatch>,
) -> Result<Vec<RecordBatch>> {
    items
        .into_iter()
        .map(|item| {
            device_batch::download(exec.backend.as_ref(), &exec.stream, &item.batch)
                .map_err(DataFusionError::from)
                .or_else(|err| {
                    recover(
                        err,
                        item.origin.as_deref(),
                        source,
                        exec,
                        metrics,
                        "GpuHashJoinExec",
                    )
                })
        })
        .collect()
}

/// The build side of device `batches` (see [`collect_and_build`]): appended on the
/// device, its key columns read back, and the table built over the key there (one
/// column in place; several as one mixed-radix key whose digits the host learns from
/// those columns). Anything the device does not cover goes through the host.
fn build_on_device(
    schema: &SchemaRef,
    batches: Vec<DeviceBatch>,
    encoding: &JoinKeys,
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    reservation: MemoryReservation,
    claim: Option<crate::DeviceClaim>,
) -> Result<Arc<BuildSide>> {
    let started = Instant::now();
    // What the device does not cover is built through the host path; a device out of
    // memory builds the side on the CPU, as one past the budget does.
    let on_host = |batches: &[DeviceBatch], reservation, table_on| {
        build_side(
            schema,
            &downloaded(exec, batches)?,
            encoding,
            exec,
            metrics,
            reservation,
            table_on,
        )
    };
    let batch = match exec
        .backend
        .append(&exec.stream, &batches, Arc::clone(schema))
    {
        Ok(batch) => batch,
        Err(EngineError::Unsupported { .. }) => {
            return on_host(&batches, reservation, TableOn::Backend(claim));
        }
        Err(err @ EngineError::OutOfMemory { .. }) => {
            out_of_device_memory(metrics, &err);
            return on_host(&batches, reservation, TableOn::Cpu);
        }
        Err(err) => return Err(DataFusionError::from(err)),
    };
    drop(batches);
    let key_columns: Vec<usize> = match encoding {
        JoinKeys::Widened(c) => vec![*c],
        JoinKeys::Numbered(cs) => cs.clone(),
    };
    let keys =
        device_batch::download_columns(exec.backend.as_ref(), &exec.stream, &batch, &key_columns)
            .map_err(DataFusionError::from)?;
    // The key as the table reads it, and what probes through the host need.
    let (key_column, dictionary, digits) = match encoding {
        JoinKeys::Widened(_) => (widened_to_int64(keys[0].as_ref())?, None, None),
        JoinKeys::Numbered(_) => {
            let radix = RadixKeys::build(&keys)?;
            let digits = radix.as_ref().and_then(|(r, _)| r.int_digits(&key_columns));
            let Some(digits) = digits else {
                return on_host(
                    std::slice::from_ref(&batch),
                    reservation,
                    TableOn::Backend(claim),
                );
            };
            let (radix, key_column) = radix.ok_or_else(|| {
                DataFusionError::Internal("radix digits without radix keys".into())
            })?;
            (key_column, Some(KeyDictionary::Radix(radix)), Some(digits))
        }
    };
    let key = match (&digits, key_columns.as_slice()) {
        (Some(radix), _) => JoinKey::Radix(radix),
        (None, [column]) => JoinKey::Column(*column),
        (None, _) => {
            return Err(DataFusionError::Internal(
                "several join keys without digits".into(),
            ));
        }
    };
    let table = match exec.backend.build_join_table(&exec.stream, &batch, key) {
        Ok(table) => table,
        Err(EngineError::Unsupported { .. }) => {
            return on_host(
                std::slice::from_ref(&batch),
                reservation,
                TableOn::Backend(claim),
            );
        }
        Err(err @ EngineError::OutOfMemory { .. }) => {
            out_of_device_memory(metrics, &err);
            return on_host(std::slice::from_ref(&batch), reservation, TableOn::Cpu);
        }
        Err(err) => return Err(DataFusionError::from(err)),
    };
    let key_bytes: usize = keys.iter().map(|k| k.get_array_memory_size()).sum();
    reservation.try_resize(key_column.get_array_memory_size() + key_bytes)?;
    record_build(metrics, table.allocated_bytes(), batch.num_rows(), started);
    Ok(Arc::new(BuildSide {
        host: std::sync::OnceLock::new(),
        width: batch.schema().fields().len(),
        device: Some((batch, table)),
        keyed: None,
        key_column,
        device_keys: Some(keys),
        device_digits: digits,
        dictionary,
        cpu_table: std::sync::OnceLock::new(),
        reservation,
        _device_claim: claim,
    }))
}

/// Joins one device batch into a device batch: on the device where both sides are
/// there and the join is one it runs (module docs); otherwise refused in place and
/// probed by the host path, its output left on the host.
fn join_device_batch(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    side: &BuildSide,
    batch: &DeviceBatch,
    join: &ProbeSpec,
    schema: &SchemaRef,
) -> Result<DeviceBatch> {
    if let Some(out) = join_on_device(exec, metrics, side, batch, join, schema)? {
        return Ok(out);
    }
    let (host, _) = refused(exec, metrics, batch)?;
    let out = probe_batch(exec, metrics, side, &host, join, schema)?;
    Ok(DeviceBatch::host(out))
}

/// The join of `batch` with a build side on the device, or `None` where this join,
/// side or backend cannot.
fn join_on_device(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    side: &BuildSide,
    batch: &DeviceBatch,
    join: &ProbeSpec,
    schema: &SchemaRef,
) -> Result<Option<DeviceBatch>> {
    let Some((build, table)) = &side.device else {
        return Ok(None);
    };
    // The probe key read as the build key was: one column, or the same digits over the
    // probe side's key columns.
    let digits: Vec<RadixDigit>;
    let key = match (&join.keys, &side.device_digits) {
        (JoinKeys::Widened(column), None) => JoinKey::Column(*column),
        (JoinKeys::Numbered(columns), Some(build_digits))
            if columns.len() == build_digits.len() =>
        {
            // The build side's digits, read from the probe side's key columns.
            digits = (build_digits.iter().zip(columns))
                .map(|(d, column)| RadixDigit {
                    column: *column,
                    ..*d
                })
                .collect();
            JoinKey::Radix(&digits)
        }
        _ => return Ok(None),
    };
    // Only the joins `joins_on_device` admits get here; a join filter or an outer join
    // needs the host path's pairs.
    let admitted = matches!(
        join.join_type,
        JoinType::Inner | JoinType::RightSemi | JoinType::RightAnti
    );
    if join.filter.is_some() || !admitted {
        return Ok(None);
    }
    let rows = super::probe_rows(join);
    if table.device() != exec.backend.device() {
        return Ok(None);
    }
    let started = Instant::now();
    // The output's columns as indices into the unprojected output, whose first
    // `build_width` are build columns (none for semi and anti joins).
    let build_width = if rows == ProbeRows::Pairs {
        side.width
    } else {
        0
    };
    let wanted = (join.projection.clone())
        .unwrap_or_else(|| (0..build_width + batch.schema().fields().len()).collect());
    let output: Vec<JoinColumn> = wanted
        .into_iter()
        .map(|i| {
            if i < build_width {
                JoinColumn::Build(i)
            } else {
                JoinColumn::Probe(i - build_width)
            }
        })
        .collect();
    let args = JoinArgs {
        build: Some(build),
        probe: batch,
        key,
        output: &output,
        rows,
        schema: Arc::clone(schema),
    };
    let out = match exec.backend.join(&exec.stream, table, args) {
        Ok(out) => out,
        Err(EngineError::Unsupported { .. }) => return Ok(None),
        Err(err) => return Err(DataFusionError::from(err)),
    };
    // What crossed: the number of pairs (8 bytes) or of kept rows (4 bytes); the
    // readbacks of string byte totals are left out.
    let moved = exec.bytes_moved(|| match rows {
        ProbeRows::Pairs => 8,
        _ => 4,
    });
    metrics.record(batch.num_rows(), out.num_rows(), started, moved);
    Ok(Some(out))
}

/// A build side the device had no memory for, built on the CPU instead: counted as a
/// device failure and named in a warning, as every device failure the answer survives.
fn out_of_device_memory(metrics: &OperatorMetrics, err: &EngineError) {
    tracing::warn!(error = %err, "device out of memory for a join's build side; it is built on the CPU");
    metrics.device_errors.add(1);
}

/// `batches` copied to the host.
fn downloaded(exec: &ExecBackend, batches: &[DeviceBatch]) -> Result<Vec<RecordBatch>> {
    batches
        .iter()
        .map(|b| device_batch::download(exec.backend.as_ref(), &exec.stream, b))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(DataFusionError::from)
}
