//! The batches of a device segment, and how a segment keeps its answer when the device
//! fails (issue #45).
//!
//! A *segment* is the part of a plan between a `HostToDeviceExec` and the operator that
//! brings its batches back to the host (a `DeviceToHostExec`, a partial aggregate or a
//! join probe reading device batches). Its operators hand each other [`SegmentBatch`]es,
//! a [`DeviceBatch`] in either form:
//!
//! - **On the device**, with its **origin**, the host batch the segment's upload started
//!   from. The origin is kept (an `Arc`, no copy: the scan's batch itself) until the
//!   batch leaves the segment, so that a device failure on any operator of the segment
//!   (a launch, a copy, a sticky kernel fault, out of memory) can **replay** that batch
//!   on the CPU: every operator below the failing one runs its CPU path on the origin
//!   ([`SegmentExec::replay`]), the failing one runs its own CPU path on the result,
//!   and the batch goes on as a host batch. The failure is counted (`device_errors`,
//!   `cpu_fallback_batches`) and named in a warning; the failing operator's backend is
//!   *degraded* (the rest of its execution runs on the CPU, as a failed device fails
//!   every later batch the same way).
//! - **On the host**: every batch on the CPU backend (the upload would be a `memcpy` into
//!   images for nothing), so placing a plan for a GPU on a machine without one costs the
//!   transitions nothing; on a device, a batch replayed after a failure (which the
//!   operators above run on the CPU: [`SegmentBatch::cpu_only`]), or one the device
//!   *refused* in place (a type or size its kernels do not take: copied back
//!   once, counted in `refused_batches`, and left on the host for the rest of the
//!   segment instead of being copied up again). Operators run their host path on it,
//!   which still uses the device where it can (`oxidelake_device::edge`: only the
//!   columns a kernel reads cross) and falls back to the CPU on its own.
//!
//! An operator has one batch function for both forms; its `execute` (a host consumer's)
//! runs that function over its input's host batches, its `execute_segment` over the
//! segment batches below it.
//!
//! A join whose build side lives on the device hands on batches without an origin: its
//! output depends on device state a batch cannot replay. A device failure there fails
//! the execution with a device error, and the session runs the query again on the CPU
//! placement if no row was emitted yet (`oxidelake-runtime`, `device_rerun`).

pub(crate) mod replay;

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{Stream, StreamExt};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::{
    BatchSizes, CpuBackend, DeviceBatch, DeviceMemory, DeviceStream, GpuBackend,
};

use crate::gathering::{coalesce_small, gather};

/// One batch between a plan's transitions (see the module docs): a [`DeviceBatch`] in
/// either of its forms, and, for one on the device, its origin.
#[derive(Debug)]
pub struct SegmentBatch {
    /// The batch: on the device, or on the host (every batch on the CPU backend; on a
    /// device, one the device refused or failed, or one from a host input).
    pub batch: DeviceBatch,
    /// For a batch on the device, the host batch the segment uploaded it from (`None`
    /// where no replay is possible: the output of a join built on the device). A batch
    /// on the host keeps none: its operators' host paths fall back on their own.
    pub origin: Option<Arc<RecordBatch>>,
    /// A batch on the host because the device failed it (replayed on the CPU, or kept on
    /// the host by an upload that failed): the operators above run it on the CPU too,
    /// each counting it in `cpu_fallback_batches`, since a failed device would fail it
    /// again (and count one failure many times).
    pub cpu_only: bool,
}

impl SegmentBatch {
    /// `batch` with `origin`, which only a batch on the device keeps.
    pub fn new(batch: DeviceBatch, origin: Option<Arc<RecordBatch>>) -> Self {
        let origin = origin.filter(|_| batch.on_device().is_some());
        Self {
            batch,
            origin,
            cpu_only: false,
        }
    }

    /// A batch on the host.
    pub fn host(batch: RecordBatch) -> Self {
        Self {
            batch: DeviceBatch::host(batch),
            origin: None,
            cpu_only: false,
        }
    }

    /// A batch on the host that the device failed (see [`Self::cpu_only`]).
    pub fn cpu_only(batch: RecordBatch) -> Self {
        Self {
            cpu_only: true,
            ..Self::host(batch)
        }
    }

    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        self.batch.num_rows()
    }

    /// The batch as a host consumer takes it; an error for one still on the device,
    /// which only a `DeviceToHostExec` brings back.
    pub(crate) fn into_host(self) -> Result<RecordBatch> {
        self.batch.as_host().cloned().ok_or_else(|| {
            DataFusionError::Internal(
                "a device batch reached a host consumer without a DeviceToHostExec".into(),
            )
        })
    }
}

/// A stream of a segment's batches.
pub type SegmentBatches = Pin<Box<dyn Stream<Item = Result<SegmentBatch>> + Send>>;

/// Device batches of one partition, with the backend whose memory holds them.
pub struct SegmentStream {
    /// The backend that allocated the batches; consumers run on it.
    pub backend: Arc<dyn GpuBackend>,
    /// Whether the hardware detector chose that backend (for the `no_device` metric).
    pub detected: bool,
    /// The batches.
    pub batches: SegmentBatches,
}

impl fmt::Debug for SegmentStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SegmentStream")
            .field("backend", &self.backend.kind())
            .finish()
    }
}

/// A node that can hand its output over as device batches.
pub trait SegmentExec {
    /// The output of `partition` as segment batches.
    fn execute_segment(&self, partition: usize, context: Arc<TaskContext>)
    -> Result<SegmentStream>;

    /// The host batch this node hands on for the segment batch whose origin (the host
    /// batch its segment uploaded) is `origin`, computed by the CPU paths of this node
    /// and those below it in the segment ([`crate::segment`]).
    fn replay(&self, origin: &RecordBatch) -> Result<RecordBatch>;
}

/// Runs `work` on tokio's blocking pool: a device call blocks on its copies and kernels,
/// and would otherwise hold a runtime worker that other tasks need.
pub(crate) async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| DataFusionError::External(Box::new(e)))?
}

/// `work` over each of `batches`, one at a time and in order: how every GPU operator
/// runs its batch function. On a device, on tokio's blocking pool ([`blocking`]: a device
/// call blocks on its copies and kernels, wherever its batches live); on the CPU backend,
/// on the polling thread, as any DataFusion operator does its CPU work: a hop to another
/// thread per batch and operator cost TPC-H Q1 at SF 1 twice its time on two cores
/// (docs/benchmarks.md).
pub(crate) fn each_batch<T: Send + 'static>(
    batches: SegmentBatches,
    backend: &dyn GpuBackend,
    work: impl Fn(SegmentBatch) -> Result<T> + Send + Sync + 'static,
) -> Pin<Box<dyn Stream<Item = Result<T>> + Send>> {
    if backend.kind() == BackendKind::CpuSimd {
        return Box::pin(batches.map(move |item| work(item?)));
    }
    let work = Arc::new(work);
    Box::pin(batches.then(move |item| {
        let work = Arc::clone(&work);
        async move {
            let item = item?;
            blocking(move || work(item)).await
        }
    }))
}

/// `batches` of a segment on the CPU backend (every one a host batch) with the small ones
/// merged up to `batch_size` rows, as [`coalesce_small`] merges a host operator's output;
/// on a device, `batches` as they are (host batches there are refused or failed ones).
pub(crate) fn coalesce_host_items(
    batches: SegmentBatches,
    backend: BackendKind,
    schema: SchemaRef,
    batch_size: usize,
) -> SegmentBatches {
    if backend != BackendKind::CpuSimd {
        return batches;
    }
    let host = batches.map(|item| item?.into_host());
    let merged = coalesce_small(
        Box::pin(RecordBatchStreamAdapter::new(schema, host)),
        batch_size,
    );
    Box::pin(merged.map(|batch| batch.map(SegmentBatch::host)))
}

/// `input`'s host batches as segment batches on the host, for an operator whose input
/// hands on none of its own; gathered to `gathered`'s sizes where given (a device's
/// batch size, which its launches are sized for).
pub(crate) fn host_items(
    input: SendableRecordBatchStream,
    gathered: Option<BatchSizes>,
) -> SegmentBatches {
    let input = match gathered {
        Some(b) => gather(input, b.batch_rows, b.batch_bytes),
        None => input,
    };
    Box::pin(input.map(|batch| batch.map(SegmentBatch::host)))
}

/// What `batches` (of an operator fed by [`host_items`], so every one on the host) hold,
/// as a host consumer takes it.
pub(crate) fn host_stream(batches: SegmentBatches, schema: SchemaRef) -> SendableRecordBatchStream {
    Box::pin(RecordBatchStreamAdapter::new(
        schema,
        batches.map(|item| item?.into_host()),
    ))
}

/// Runs `op` on the CPU reference backend (a replay's work: no device is involved).
pub(crate) fn on_cpu<T>(
    op: impl FnOnce(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
) -> Result<T> {
    let cpu = CpuBackend::new();
    let stream = cpu.create_stream().map_err(DataFusionError::from)?;
    op(&cpu, &stream).map_err(DataFusionError::from)
}
