//! The two traits every device implements: its memory, and its operators over device
//! batches.

use std::fmt::Debug;

use arrow::array::{ArrayRef, Float64Array};
use arrow::record_batch::RecordBatch;
use oxidelake_core::{BackendKind, DeviceId, EngineError};

use crate::device_batch::Widening;
use crate::ops::{AggregateArgs, EvaluateArgs, JoinArgs, JoinKey, Predicate, VectorDistanceArgs};
use crate::{DeviceBatch, DeviceBuffer, DeviceStream, HostBuffer, JoinTable};

/// Memory of one device, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryInfo {
    /// Total memory of the device.
    pub total_bytes: u64,
    /// Memory currently free.
    pub free_bytes: u64,
}

/// A device's memory: allocations, copies, streams and pools (as candle splits a
/// backend's storage from its operations). Every [`GpuBackend`] is one.
///
/// The trait is synchronous on purpose: copies and kernels are *enqueued* on a
/// [`DeviceStream`] and [`DeviceMemory::synchronize`] waits for them. Handles are opaque
/// and tagged with the backend that made them; passing a handle to another backend is an
/// error, not undefined behaviour.
///
/// Destinations are `&mut` (the spec's sketch had `&DeviceBuffer` for the host-to-device
/// destination): a copy writes the buffer, and Rust should say so.
pub trait DeviceMemory: Send + Sync + Debug {
    /// The kind of backend.
    fn kind(&self) -> BackendKind;

    /// The device this backend drives.
    fn device(&self) -> DeviceId;

    /// The batch sizes the backend wants operators to hand it (`None`: any batch, as it
    /// arrives; the CPU backend's answer).
    fn batching(&self) -> Option<crate::BatchSizes> {
        None
    }

    /// Whether the backend's batches are host batches ([`DeviceBatch::host`], no copy):
    /// its "device" memory is the host's (the CPU backend).
    fn keeps_batches_on_host(&self) -> bool {
        false
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

    /// Enqueues a copy of all of `src` into the start of `dst`, which must be at least
    /// as long (an upload copies only the part of a batch that crosses the bus, and
    /// widens the rest on the device: `device_batch::upload`).
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

    /// The pool that device batches on this backend take their allocations from and
    /// give them back to (`device_batch::DevicePool`); `None` where allocating costs
    /// nothing worth pooling (the CPU backend's "device" is host memory).
    fn device_pool(&self) -> Option<std::sync::Arc<crate::device_batch::DevicePool>> {
        None
    }

    /// Columns `columns` of a batch on this device, copied to the host in their own
    /// types, without the rest of the batch. The default refuses with `Unsupported`;
    /// [`crate::device_batch::download_columns`] then copies the whole batch.
    fn download_columns(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        columns: &[usize],
    ) -> Result<Vec<ArrayRef>, EngineError> {
        let _ = (stream, batch, columns);
        Err(EngineError::unsupported(
            "device column download",
            format!("the {} backend copies whole batches", self.kind()),
        ))
    }
}

/// One compute device's operators, used as `Arc<dyn GpuBackend>` (selected at runtime).
///
/// Every operator takes and returns [`DeviceBatch`]es (ADR-0015): on a GPU their
/// columns stay in device memory between operators, on the CPU backend they are the
/// host batches themselves. A host batch reaches an operator through [`crate::edge`],
/// which uploads what the operator reads. Inputs outside an operator's coverage return
/// [`EngineError::Unsupported`] before any work, and the calling operator runs that batch
/// on the CPU.
pub trait GpuBackend: DeviceMemory {
    /// Fused filter + projection: the rows of `batch` where every predicate is true,
    /// columns `projection`.
    fn filter_project(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        predicates: &[Predicate],
        projection: &[usize],
    ) -> Result<DeviceBatch, EngineError>;

    /// Computed columns beside passed-through ones (see [`EvaluateArgs`]).
    fn evaluate(
        &self,
        stream: &DeviceStream,
        args: EvaluateArgs<'_>,
    ) -> Result<DeviceBatch, EngineError>;

    /// Grouped partial aggregation; the result (one row per group) comes back to the
    /// host (see [`AggregateArgs`]).
    fn aggregate(
        &self,
        stream: &DeviceStream,
        args: AggregateArgs<'_>,
    ) -> Result<RecordBatch, EngineError>;

    /// A join table over `batch`'s Int64 key read as `key` says.
    fn build_join_table(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        key: JoinKey<'_>,
    ) -> Result<JoinTable, EngineError>;

    /// Joins a probe batch with the build batch `table` was built over; the output is a
    /// batch of this backend (see [`JoinArgs`]).
    fn join(
        &self,
        stream: &DeviceStream,
        table: &JoinTable,
        args: JoinArgs<'_>,
    ) -> Result<DeviceBatch, EngineError>;

    /// `batches` (each with `schema`) as one batch, rows in order (a join's build side).
    fn append(
        &self,
        stream: &DeviceStream,
        batches: &[DeviceBatch],
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<DeviceBatch, EngineError>;

    /// Writes each widening's 8-byte images from its narrow offsets, both in `memory`
    /// (an upload's allocation, after the copy that filled the offsets and before the
    /// batch is read; see [`Widening`]).
    fn widen_images(
        &self,
        stream: &DeviceStream,
        memory: &mut DeviceBuffer,
        widenings: &[Widening],
    ) -> Result<(), EngineError>;

    /// Distances between a vector column and a query vector. The vectors are a host
    /// column: a device batch holds one image a row, and a vector is many.
    fn vector_distance(
        &self,
        stream: &DeviceStream,
        args: VectorDistanceArgs<'_>,
    ) -> Result<Float64Array, EngineError>;
}

/// Counts the unset bits of a host-visible bitmap (the CPU backend's device memory).
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

/// Widens an upload's offsets into images in host-visible memory (the CPU backend's
/// device memory): the reference of CUDA's `widen_images`. The
/// widenings are checked ([`crate::ops::validate::widenings`]) against `memory`.
pub(crate) fn host_widen_images(memory: &mut [u8], widenings: &[Widening]) {
    for w in widenings {
        // The spans are apart (checked): read the offsets out, then write the images.
        let narrow = memory[w.narrow.offset..w.narrow.offset + w.narrow.len].to_vec();
        let images = &mut memory[w.images.offset..w.images.offset + w.images.len];
        for (image, offset) in images.chunks_exact_mut(8).zip(narrow.chunks_exact(w.width)) {
            let mut wide = [0u8; 8];
            wide[..w.width].copy_from_slice(offset);
            let value = (w.base as u64).wrapping_add(u64::from_le_bytes(wide));
            image.copy_from_slice(&value.to_le_bytes());
        }
    }
}

/// Checks that a host-to-device copy's source fits its destination.
pub(crate) fn check_copy_fits(src_bytes: usize, dst_bytes: usize) -> Result<(), EngineError> {
    if src_bytes > dst_bytes {
        return Err(EngineError::InvalidArgument {
            what: "copy length",
            detail: format!("source has {src_bytes} bytes, destination {dst_bytes}"),
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
