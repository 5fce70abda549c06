//! The backend trait every device implements.

use std::fmt::Debug;

use arrow::array::{ArrayRef, Float64Array, Int64Array};
use arrow::record_batch::RecordBatch;
use oxidelake_core::{BackendKind, DeviceId, EngineError};

use crate::ops::{AggregateArgs, EvaluateArgs, FilterProjectArgs, JoinMatches, VectorDistanceArgs};
use crate::{DeviceBuffer, DeviceStream, HostBuffer, JoinTable};

/// Memory of one device, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Total memory of the device.
    pub total_bytes: u64,
    /// Memory currently free.
    pub free_bytes: u64,
}

/// One compute device, selected at runtime and used as `Arc<dyn GpuBackend>`.
///
/// The trait is synchronous on purpose: copies and kernels are *enqueued* on a
/// [`DeviceStream`] and [`GpuBackend::synchronize`] waits for them. Handles are opaque
/// and tagged with the backend that made them; passing a handle to another backend is an
/// error, not undefined behaviour.
///
/// Destinations are `&mut` (the spec's sketch had `&DeviceBuffer` for the host-to-device
/// destination): a copy writes the buffer, and Rust should say so.
///
/// The operator kernels take and return host Arrow data (see [`crate::ops`]); each
/// backend moves the bytes it needs to the device and back, overlapping copies with
/// compute where it can. Inputs outside the v1 coverage return
/// [`EngineError::Unsupported`], and the calling operator runs that batch on the CPU.
pub trait GpuBackend: Send + Sync + Debug {
    /// The kind of backend.
    fn kind(&self) -> BackendKind;

    /// The device this backend drives.
    fn device(&self) -> DeviceId;

    /// The batch and chunk sizes the backend wants operators to hand it (`None`: any
    /// batch, as it arrives; the CPU backend's answer).
    fn batching(&self) -> Option<crate::BatchSizes> {
        None
    }

    /// Total and free memory of the device.
    fn memory_info(&self) -> Result<MemoryInfo, EngineError>;

    /// Allocates `bytes` of zeroed device memory, 128-byte aligned or better.
    fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, EngineError>;

    /// Allocates `bytes` of zeroed host memory for transfers: pinned where the backend can
    /// pin, pageable otherwise (see [`HostBuffer::memory_class`]).
    fn alloc_pinned_host(&self, bytes: usize) -> Result<HostBuffer, EngineError>;

    /// Creates a stream (an in-order queue of copies and kernels).
    fn create_stream(&self) -> Result<DeviceStream, EngineError>;

    /// Enqueues a copy of all of `src` into `dst`; the lengths must be equal.
    fn copy_h2d(
        &self,
        stream: &DeviceStream,
        src: &HostBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), EngineError>;

    /// Enqueues a copy of all of `src` into `dst`; the lengths must be equal.
    fn copy_d2h(
        &self,
        stream: &DeviceStream,
        src: &DeviceBuffer,
        dst: &mut HostBuffer,
    ) -> Result<(), EngineError>;

    /// Blocks until everything enqueued on `stream` has finished.
    fn synchronize(&self, stream: &DeviceStream) -> Result<(), EngineError>;

    /// Counts the unset bits (nulls) in `len_bits` bits of an Arrow validity bitmap held
    /// in device memory, starting at bit `offset_bits`. Used to check that a copy kept the
    /// null count the host saw before it.
    fn null_count(
        &self,
        stream: &DeviceStream,
        validity: &DeviceBuffer,
        offset_bits: usize,
        len_bits: usize,
    ) -> Result<u64, EngineError>;

    /// Fused filter + projection of one batch.
    fn filter_project(
        &self,
        stream: &DeviceStream,
        args: FilterProjectArgs<'_>,
    ) -> Result<RecordBatch, EngineError>;

    /// Fused filter + projection of a batch that lives on this device, into a batch that
    /// stays there (ADR-0014). The default refuses with `Unsupported`; the operator then
    /// bridges the batch through [`GpuBackend::filter_project`] on the host.
    fn filter_project_resident(
        &self,
        stream: &DeviceStream,
        batch: &crate::DeviceBatch,
        predicates: &[crate::ops::Predicate],
        projection: &[usize],
    ) -> Result<crate::DeviceBatch, EngineError> {
        let _ = (stream, batch, predicates, projection);
        Err(EngineError::unsupported(
            "device-resident filter",
            format!("the {} backend filters through the host", self.kind()),
        ))
    }

    /// Grouped partial aggregation of a batch that lives on this device; the small
    /// result (one row per group) comes back to the host (ADR-0014). The default refuses
    /// with `Unsupported`; the operator then bridges the batch through
    /// [`GpuBackend::aggregate`] on the host.
    fn aggregate_resident(
        &self,
        stream: &DeviceStream,
        args: crate::ops::AggregateResidentArgs<'_>,
    ) -> Result<RecordBatch, EngineError> {
        let _ = (stream, args);
        Err(EngineError::unsupported(
            "device-resident aggregate",
            format!("the {} backend aggregates through the host", self.kind()),
        ))
    }

    /// Probes `table` with a batch that lives on this device; the matched pairs' build
    /// rows and gathered probe columns come back to the host (ADR-0014). The default
    /// refuses with `Unsupported`; the operator then bridges the batch through
    /// [`GpuBackend::probe_join_table`] on the host.
    fn probe_join_table_resident(
        &self,
        stream: &DeviceStream,
        table: &JoinTable,
        args: crate::ops::ProbeResidentArgs<'_>,
    ) -> Result<crate::ops::ResidentMatches, EngineError> {
        let _ = (stream, table, args);
        Err(EngineError::unsupported(
            "device-resident join probe",
            format!("the {} backend probes through the host", self.kind()),
        ))
    }

    /// The pool that device batches on this backend take their allocations from and
    /// give them back to (`resident::DevicePool`); `None` where allocating costs
    /// nothing worth pooling (the CPU backend's "device" is host memory).
    fn device_pool(&self) -> Option<std::sync::Arc<crate::resident::DevicePool>> {
        None
    }

    /// `batches` (which live on this device, each with `schema`) as one device batch,
    /// rows in order (ADR-0014, stage 3: a join's build side). The default refuses with
    /// `Unsupported`; the caller then downloads the batches.
    fn append_resident(
        &self,
        stream: &DeviceStream,
        batches: &[crate::DeviceBatch],
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<crate::DeviceBatch, EngineError> {
        let _ = (stream, batches, schema);
        Err(EngineError::unsupported(
            "device-resident append",
            format!("the {} backend appends batches on the host", self.kind()),
        ))
    }

    /// Columns `columns` of a batch that lives on this device, copied to the host in
    /// their own types, without the rest of the batch. The default refuses with
    /// `Unsupported`; [`crate::resident::download_columns`] then copies the whole batch.
    fn download_columns(
        &self,
        stream: &DeviceStream,
        batch: &crate::DeviceBatch,
        columns: &[usize],
    ) -> Result<Vec<ArrayRef>, EngineError> {
        let _ = (stream, batch, columns);
        Err(EngineError::unsupported(
            "device-resident column download",
            format!("the {} backend copies whole batches", self.kind()),
        ))
    }

    /// Builds a join table over the key of a batch that lives on this device (ADR-0014,
    /// stage 3). The default refuses with `Unsupported`; the join then builds on the
    /// host.
    fn build_join_table_resident(
        &self,
        stream: &DeviceStream,
        batch: &crate::DeviceBatch,
        key: crate::ops::ResidentKey<'_>,
    ) -> Result<JoinTable, EngineError> {
        let _ = (stream, batch, key);
        Err(EngineError::unsupported(
            "device-resident join build",
            format!("the {} backend builds joins on the host", self.kind()),
        ))
    }

    /// Joins a batch that lives on this device with a build side that does
    /// (`build_join_table_resident`'s table and batch); the output stays on the device
    /// (ADR-0014, stage 3). The default refuses with `Unsupported`; the join then
    /// bridges the batch through the host.
    fn join_resident(
        &self,
        stream: &DeviceStream,
        table: &JoinTable,
        args: crate::ops::JoinResidentArgs<'_>,
    ) -> Result<crate::DeviceBatch, EngineError> {
        let _ = (stream, table, args);
        Err(EngineError::unsupported(
            "device-resident join",
            format!("the {} backend joins through the host", self.kind()),
        ))
    }

    /// Computed columns (arithmetic) of one batch.
    fn evaluate(
        &self,
        stream: &DeviceStream,
        args: EvaluateArgs<'_>,
    ) -> Result<Vec<ArrayRef>, EngineError>;

    /// Computed columns of a batch that lives on this device, into a batch that stays
    /// there with the passed-through columns beside them (ADR-0014). The default refuses
    /// with `Unsupported`; the operator then bridges the batch through
    /// [`GpuBackend::evaluate`] on the host.
    fn evaluate_resident(
        &self,
        stream: &DeviceStream,
        args: crate::ops::EvaluateResidentArgs<'_>,
    ) -> Result<crate::DeviceBatch, EngineError> {
        let _ = (stream, args);
        Err(EngineError::unsupported(
            "device-resident projection",
            format!(
                "the {} backend computes columns through the host",
                self.kind()
            ),
        ))
    }

    /// Builds a hash table over the (Int64) build-side join keys.
    fn build_join_table(
        &self,
        stream: &DeviceStream,
        build_keys: &Int64Array,
    ) -> Result<JoinTable, EngineError>;

    /// Probes a table built by this backend with one batch of probe keys.
    fn probe_join_table(
        &self,
        stream: &DeviceStream,
        table: &JoinTable,
        probe_keys: &Int64Array,
    ) -> Result<JoinMatches, EngineError>;

    /// Grouped aggregation of one batch (partial results; see [`AggregateArgs`]).
    fn aggregate(
        &self,
        stream: &DeviceStream,
        args: AggregateArgs<'_>,
    ) -> Result<RecordBatch, EngineError>;

    /// Distances between a vector column and a query vector.
    fn vector_distance(
        &self,
        stream: &DeviceStream,
        args: VectorDistanceArgs<'_>,
    ) -> Result<Float64Array, EngineError>;
}

/// Counts the unset bits of a host-visible bitmap (the CPU backend's device memory, and
/// Metal's unified memory, where the CPU reads the very bytes the GPU sees).
pub(crate) fn host_null_count(
    bitmap: &[u8],
    offset_bits: usize,
    len_bits: usize,
) -> Result<u64, EngineError> {
    check_bitmap_range(bitmap.len(), offset_bits, len_bits)?;
    let set =
        arrow::util::bit_chunk_iterator::UnalignedBitChunk::new(bitmap, offset_bits, len_bits)
            .count_ones();
    Ok((len_bits - set) as u64)
}

/// Checks that a bitmap of `bitmap_bytes` bytes covers `offset_bits + len_bits` bits.
pub(crate) fn check_bitmap_range(
    bitmap_bytes: usize,
    offset_bits: usize,
    len_bits: usize,
) -> Result<(), EngineError> {
    let end_bits =
        offset_bits
            .checked_add(len_bits)
            .ok_or_else(|| EngineError::InvalidArgument {
                what: "bitmap range",
                detail: "offset + length overflows".into(),
            })?;
    if end_bits.div_ceil(8) > bitmap_bytes {
        return Err(EngineError::InvalidArgument {
            what: "bitmap range",
            detail: format!(
                "bits {offset_bits}..{end_bits} exceed a bitmap of {bitmap_bytes} bytes"
            ),
        });
    }
    Ok(())
}

/// Checks that a copy's source and destination have the same length.
pub(crate) fn check_copy_lengths(src_bytes: usize, dst_bytes: usize) -> Result<(), EngineError> {
    if src_bytes != dst_bytes {
        return Err(EngineError::InvalidArgument {
            what: "copy length",
            detail: format!("source has {src_bytes} bytes, destination {dst_bytes}"),
        });
    }
    Ok(())
}
