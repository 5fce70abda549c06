//! The batches of a device segment, and how a segment keeps its answer when the device
//! fails (issue #45).
//!
//! A *segment* is the part of a plan between a `HostToDeviceExec` and the operator that
//! brings its batches back to the host (a `DeviceToHostExec`, a partial aggregate or a
//! join probe reading device batches). Its operators hand each other
//! [`SegmentBatch`]es:
//!
//! - [`SegmentBatch::Device`]: a [`DeviceBatch`] on the device, with its **origin**, the
//!   host batch the segment's upload started from. The origin is kept (an `Arc`, no
//!   copy: the scan's batch itself) until the batch leaves the segment, so that a device
//!   failure on any operator of the segment (a launch, a copy, a sticky kernel fault, out
//!   of memory) can **replay** that batch on the CPU: every operator below the failing
//!   one runs its CPU path on the origin ([`ResidentExec::replay`]), the failing one
//!   runs its own CPU path on the result, and the batch goes on as a host batch. The
//!   failure is counted (`device_errors`, `cpu_fallback_batches`) and named in a
//!   warning; the failing operator's backend is *degraded* (the rest of its execution
//!   runs on the CPU, as a failed device fails every later batch the same way).
//! - [`SegmentBatch::Host`]: a batch on the host. On the CPU backend every batch is one
//!   (the upload would be a `memcpy` into images for nothing), so placing a plan for a
//!   GPU on a machine without one costs the transitions nothing; on a device, a replayed
//!   batch is one. Operators run their host path on it.
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
use datafusion::execution::TaskContext;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::{Stream, StreamExt};
use oxidelake_core::{BackendKind, EngineError};
use oxidelake_device::{CpuBackend, DeviceBatch, DeviceMemory, DeviceStream, GpuBackend};

use crate::gathering::coalesce_small;

/// One batch between a plan's transitions (see the module docs).
#[derive(Debug)]
pub enum SegmentBatch {
    /// On the device, with the host batch the segment uploaded it from (`None` where no
    /// replay is possible: the output of a join built on the device).
    Device {
        /// The batch.
        batch: DeviceBatch,
        /// The host batch the segment started from.
        origin: Option<Arc<RecordBatch>>,
    },
    /// On the host: every batch on the CPU backend; a replayed one on a device.
    Host(RecordBatch),
}

impl SegmentBatch {
    /// Rows in the batch.
    pub fn num_rows(&self) -> usize {
        match self {
            Self::Device { batch, .. } => batch.num_rows(),
            Self::Host(batch) => batch.num_rows(),
        }
    }
}

/// A stream of a segment's batches.
pub type SegmentBatches = Pin<Box<dyn Stream<Item = Result<SegmentBatch>> + Send>>;

/// Device batches of one partition, with the backend whose memory holds them.
pub struct ResidentStream {
    /// The backend that allocated the batches; consumers run on it.
    pub backend: Arc<dyn GpuBackend>,
    /// Whether the hardware detector chose that backend (for the `no_device` metric).
    pub detected: bool,
    /// The batches.
    pub batches: SegmentBatches,
}

impl fmt::Debug for ResidentStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResidentStream")
            .field("backend", &self.backend.kind())
            .finish()
    }
}

/// A node that can hand its output over as device batches.
pub trait ResidentExec {
    /// The output of `partition` as segment batches.
    fn execute_resident(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<ResidentStream>;

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

/// `work` over each of `batches`, one at a time and in order: how a segment's operators
/// run their batches. On a device, on tokio's blocking pool ([`blocking`]: a device call
/// blocks on its copies and kernels); on a backend that keeps its batches on the host
/// (the CPU backend), on the polling thread, as any DataFusion operator does its CPU
/// work: a hop to another thread per batch and operator cost TPC-H Q1 at SF 1 twice its
/// time on two cores (docs/benchmarks.md).
pub(crate) fn each_batch<T: Send + 'static>(
    batches: SegmentBatches,
    backend: &dyn GpuBackend,
    work: impl Fn(SegmentBatch) -> Result<T> + Send + Sync + 'static,
) -> Pin<Box<dyn Stream<Item = Result<T>> + Send>> {
    if backend.keeps_batches_on_host() {
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
/// on a device, `batches` as they are (a host batch there is a rare replayed one).
pub(crate) fn coalesce_host_items(
    batches: SegmentBatches,
    backend: BackendKind,
    schema: SchemaRef,
    batch_size: usize,
) -> SegmentBatches {
    if backend != BackendKind::CpuSimd {
        return batches;
    }
    let host = batches.map(|item| match item? {
        SegmentBatch::Host(batch) => Ok(batch),
        SegmentBatch::Device { .. } => Err(DataFusionError::Internal(
            "a device batch in a segment on the CPU backend".into(),
        )),
    });
    let merged = coalesce_small(
        Box::pin(RecordBatchStreamAdapter::new(schema, host)),
        batch_size,
    );
    Box::pin(merged.map(|batch| batch.map(SegmentBatch::Host)))
}

/// Runs `op` on the CPU reference backend (a replay's work: no device is involved).
pub(crate) fn on_cpu<T>(
    op: impl FnOnce(&dyn GpuBackend, &DeviceStream) -> std::result::Result<T, EngineError>,
) -> Result<T> {
    let cpu = CpuBackend::new();
    let stream = cpu.create_stream().map_err(DataFusionError::from)?;
    op(&cpu, &stream).map_err(DataFusionError::from)
}
