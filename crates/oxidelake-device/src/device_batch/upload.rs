//! A host batch as a [`DeviceBatch`] (module docs of `device_batch`): wrapped on a backend
//! that keeps its batches on the host; otherwise each column packed into one staging
//! buffer in the kernels' format, then one host-to-device copy into one allocation.

use arrow::array::{Array, AsArray, StringArray};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::Decimal128Type;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use super::{
    DeviceBatch, DeviceColumn, DeviceColumns, Layout, StagingPool, ValueLayout,
    check_device_schema, staging_buffer,
};
use crate::ops::{ValueClass, is_overflow, load_images, string_column, value_class};
use crate::{DeviceStream, GpuBackend};

/// A column's parts as they are written into the staging buffer.
enum HostParts {
    Images(Vec<i64>),
    Wide(Vec<i128>),
    Strings(StringArray),
}

/// The bytes of `nulls` from bit 0 (a sliced bitmap is re-packed).
fn validity_bytes(nulls: &NullBuffer) -> Vec<u8> {
    let bits = nulls.inner();
    if bits.offset() == 0 {
        bits.values()[..bits.len().div_ceil(8)].to_vec()
    } else {
        BooleanBuffer::from_iter(bits.iter()).values().to_vec()
    }
}

/// `batch` as its backend keeps batches: wrapped without a copy where the backend's
/// memory is the host's ([`crate::DeviceMemory::keeps_batches_on_host`]), otherwise copied to the
/// device as one allocation (see the module docs). Fails with `Unsupported` for a column
/// type outside [`is_device_type`], before any device work.
pub fn upload(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &RecordBatch,
) -> Result<DeviceBatch, EngineError> {
    upload_with(backend, stream, batch, None)
}

/// [`upload`], staging through a buffer of `pool` (returned to it afterwards).
pub fn upload_with(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &RecordBatch,
    pool: Option<&StagingPool>,
) -> Result<DeviceBatch, EngineError> {
    if backend.keeps_batches_on_host() {
        // The same refusals on every backend, though this one copies nothing.
        check_device_schema(&batch.schema())?;
        return Ok(DeviceBatch::host(batch.clone()));
    }
    upload_columns(backend, stream, batch, pool).map(DeviceBatch::from)
}

/// `batch` copied into device memory in the kernels' form, on any backend (on the CPU
/// backend, 128-byte-aligned host memory: the form's own tests use it there).
pub fn upload_columns(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &RecordBatch,
    pool: Option<&StagingPool>,
) -> Result<DeviceColumns, EngineError> {
    check_device_schema(&batch.schema())?;
    let rows = batch.num_rows();
    let mut layout = Layout::new();
    let mut parts = Vec::with_capacity(batch.num_columns());
    let mut columns = Vec::with_capacity(batch.num_columns());
    for column in batch.columns() {
        let (part, values, nulls) = match value_class(column.data_type()) {
            Some(ValueClass::Str) => {
                let strings = string_column(column.as_ref())?;
                let offsets = strings.value_offsets();
                let bytes = (offsets[rows] - offsets[0]) as usize;
                let values = ValueLayout::Strings {
                    offsets: layout.take((rows + 1) * 4),
                    bytes: layout.take(bytes),
                };
                let nulls = strings.nulls().cloned();
                (HostParts::Strings(strings), values, nulls)
            }
            // Exact images; a decimal with a valid value beyond 64 bits (the only
            // overflow `load_images` reports) keeps its 16-byte values.
            _ => match load_images(column.as_ref()) {
                Ok(images) => {
                    let values = ValueLayout::Images(layout.take(rows * 8));
                    (HostParts::Images(images), values, column.logical_nulls())
                }
                Err(err) if is_overflow(&err) => {
                    let wide = column.as_primitive::<Decimal128Type>().values().to_vec();
                    let values = ValueLayout::Wide(layout.take(rows * 16));
                    (HostParts::Wide(wide), values, column.logical_nulls())
                }
                Err(err) => return Err(err),
            },
        };
        let nulls = nulls.filter(|n| n.null_count() > 0);
        let validity = nulls.as_ref().map(|_| layout.take(rows.div_ceil(8)));
        columns.push(DeviceColumn {
            data_type: column.data_type().clone(),
            values,
            validity,
        });
        parts.push((part, nulls));
    }
    let size = layout.size();
    // A pooled buffer holds an earlier batch's bytes: every span is written below, and
    // nothing reads the gaps between spans.
    let mut staging = staging_buffer(backend, pool, size)?;
    let out = staging.as_mut_slice()?;
    for ((part, nulls), column) in parts.iter().zip(&columns) {
        match (part, column.values) {
            (HostParts::Images(images), ValueLayout::Images(span)) => {
                for (dst, v) in out[span.range()].chunks_exact_mut(8).zip(images) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
            (HostParts::Wide(values), ValueLayout::Wide(span)) => {
                for (dst, v) in out[span.range()].chunks_exact_mut(16).zip(values) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
            (HostParts::Strings(strings), ValueLayout::Strings { offsets, bytes }) => {
                let from = strings.value_offsets();
                let base = from[0];
                for (dst, o) in out[offsets.range()].chunks_exact_mut(4).zip(from) {
                    dst.copy_from_slice(&(o - base).to_le_bytes());
                }
                let text = &strings.value_data()[base as usize..from[rows] as usize];
                out[bytes.range()].copy_from_slice(text);
            }
            _ => {
                return Err(EngineError::Internal(
                    "device column parts and layout disagree".into(),
                ));
            }
        }
        if let (Some(nulls), Some(span)) = (nulls, column.validity) {
            out[span.range()].copy_from_slice(&validity_bytes(nulls));
        }
    }
    // Every byte of the allocation is written by the copy: a pooled one needs no reset.
    let device_pool = backend.device_pool();
    let mut memory = match device_pool.as_ref().map(|p| (p.take(size), p)) {
        Some((Some(parked), _)) => parked,
        Some((None, pool)) => {
            pool.note_allocated();
            backend.alloc_device(size)?
        }
        None => backend.alloc_device(size)?,
    };
    backend.copy_h2d(stream, &staging, &mut memory)?;
    // The staging buffer is freed or reused on return: the copy must have read it.
    backend.synchronize(stream)?;
    if let Some(pool) = pool {
        pool.give(staging);
    }
    Ok(DeviceColumns::from_parts(
        batch.schema(),
        rows,
        columns,
        memory,
        device_pool,
    ))
}
