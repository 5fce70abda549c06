//! Copying a [`DeviceBatch`] back to the host (module docs of `device_batch`): one
//! device-to-host copy into one staging buffer, each column rebuilt in its own Arrow type.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanArray, Decimal128Array, Float64Array, Int64Array, StringArray,
    make_array,
};
use arrow::buffer::{BooleanBuffer, NullBuffer, OffsetBuffer, ScalarBuffer};
use arrow::compute::cast;
use arrow::datatypes::DataType;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use oxidelake_core::EngineError;

use super::{
    DeviceBatch, DeviceColumn, DeviceColumns, Span, StagingPool, ValueLayout, staging_buffer,
};
use crate::{DeviceStream, GpuBackend};

/// `batch` on the host with its columns' original types: one copy from a device, the
/// batch itself where it is in host memory.
pub fn download(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &DeviceBatch,
) -> Result<RecordBatch, EngineError> {
    download_with(backend, stream, batch, None)
}

/// [`download`], staging through a buffer of `pool` (returned to it afterwards: the
/// arrays are copied out of it).
pub fn download_with(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &DeviceBatch,
    pool: Option<&StagingPool>,
) -> Result<RecordBatch, EngineError> {
    match (batch.as_host(), batch.on_device()) {
        (Some(host), _) => Ok(host.clone()),
        (None, Some(columns)) => copy_back(backend, stream, columns, pool),
        (None, None) => Err(EngineError::Internal("a batch in neither form".into())),
    }
}

/// Device columns copied back to the host (one copy), each in its own Arrow type.
pub(crate) fn copy_back(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &DeviceColumns,
    pool: Option<&StagingPool>,
) -> Result<RecordBatch, EngineError> {
    let mut staging = staging_buffer(backend, pool, batch.memory.len())?;
    backend.copy_d2h(stream, &batch.memory, &mut staging)?;
    backend.synchronize(stream)?;
    let bytes = staging.as_slice()?;
    let rows = batch.rows;
    let columns = batch
        .columns
        .iter()
        .map(|column| host_column(bytes, rows, column))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(pool) = pool {
        pool.give(staging);
    }
    let options = RecordBatchOptions::new().with_row_count(Some(rows));
    Ok(RecordBatch::try_new_with_options(
        batch.schema(),
        columns,
        &options,
    )?)
}

/// Columns `columns` of `batch` on the host: only those columns' bytes where the backend
/// copies parts of a batch ([`crate::DeviceMemory::download_columns`]), the whole batch otherwise.
pub fn download_columns(
    backend: &dyn GpuBackend,
    stream: &DeviceStream,
    batch: &DeviceBatch,
    columns: &[usize],
) -> Result<Vec<ArrayRef>, EngineError> {
    if batch.as_host().is_none() {
        match backend.download_columns(stream, batch, columns) {
            Err(EngineError::Unsupported { .. }) => {}
            done => return done,
        }
    }
    let host = download(backend, stream, batch)?;
    columns
        .iter()
        .map(|c| {
            host.columns()
                .get(*c)
                .cloned()
                .ok_or_else(|| EngineError::InvalidArgument {
                    what: "column",
                    detail: format!("column {c} of {}", host.num_columns()),
                })
        })
        .collect()
}

/// Column `column` of a batch as copied off a device: its values' bytes (offsets then
/// bytes for strings) and its validity bitmap's, each from byte 0 of its span.
#[cfg(feature = "cuda")]
pub(crate) fn column_from_spans(
    column: &DeviceColumn,
    rows: usize,
    values: &[u8],
    text: &[u8],
    validity: Option<&[u8]>,
) -> Result<ArrayRef, EngineError> {
    // Lay the parts out as `host_column` reads an allocation: values, text, validity.
    let mut bytes = Vec::with_capacity(values.len() + text.len() + validity.map_or(0, <[u8]>::len));
    let mut at = |part: &[u8]| {
        let span = Span {
            offset: bytes.len(),
            len: part.len(),
        };
        bytes.extend_from_slice(part);
        span
    };
    let (values_span, text_span) = (at(values), at(text));
    let validity_span = validity.map(&mut at);
    let values = match column.values {
        ValueLayout::Images(_) => ValueLayout::Images(values_span),
        ValueLayout::Wide(_) => ValueLayout::Wide(values_span),
        ValueLayout::Strings { .. } => ValueLayout::Strings {
            offsets: values_span,
            bytes: text_span,
        },
    };
    let relaid = DeviceColumn {
        data_type: column.data_type.clone(),
        values,
        validity: validity_span,
    };
    host_column(&bytes, rows, &relaid)
}

/// The little-endian values of type `T` in `span`.
fn read<T, const N: usize>(bytes: &[u8], span: Span, from: fn([u8; N]) -> T) -> Vec<T> {
    bytes[span.range()]
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            from(a)
        })
        .collect()
}

/// One column rebuilt on the host from the downloaded bytes.
fn host_column(bytes: &[u8], rows: usize, column: &DeviceColumn) -> Result<ArrayRef, EngineError> {
    let nulls = column
        .validity
        .map(|span| {
            NullBuffer::new(BooleanBuffer::new(
                bytes[span.range()].to_vec().into(),
                0,
                rows,
            ))
        })
        .filter(|n| n.null_count() > 0);
    match column.values {
        ValueLayout::Strings {
            offsets,
            bytes: text,
        } => {
            let offsets = read(bytes, offsets, i32::from_le_bytes);
            let strings = StringArray::try_new(
                OffsetBuffer::new(ScalarBuffer::from(offsets)),
                bytes[text.range()].to_vec().into(),
                nulls,
            )?;
            if column.data_type == DataType::Utf8 {
                Ok(Arc::new(strings))
            } else {
                Ok(cast(&strings, &column.data_type)?)
            }
        }
        ValueLayout::Images(span) => {
            let images = read(bytes, span, i64::from_le_bytes);
            from_images(images, nulls, &column.data_type)
        }
        ValueLayout::Wide(span) => {
            let DataType::Decimal128(precision, scale) = column.data_type else {
                return Err(EngineError::Internal(format!(
                    "a device column of 16-byte values has type {}",
                    column.data_type
                )));
            };
            let values = read(bytes, span, i128::from_le_bytes);
            Ok(Arc::new(
                Decimal128Array::new(values.into(), nulls)
                    .with_precision_and_scale(precision, scale)?,
            ))
        }
    }
}

/// The Arrow array of type `dt` whose 8-byte images are `images` (the inverse of
/// [`crate::ops::write_images`] for the resident types).
fn from_images(
    images: Vec<i64>,
    nulls: Option<NullBuffer>,
    dt: &DataType,
) -> Result<ArrayRef, EngineError> {
    let physical = match dt {
        DataType::Float32 | DataType::Float64 => {
            let floats = Float64Array::new(
                images
                    .into_iter()
                    .map(|b| f64::from_bits(b as u64))
                    .collect(),
                nulls,
            );
            return Ok(cast(&floats, dt)?);
        }
        DataType::Boolean => {
            let values = BooleanBuffer::from_iter(images.iter().map(|v| *v != 0));
            return Ok(Arc::new(BooleanArray::new(values, nulls)));
        }
        DataType::Decimal128(precision, scale) => {
            let values = Decimal128Array::new(images.into_iter().map(i128::from).collect(), nulls)
                .with_precision_and_scale(*precision, *scale)?;
            return Ok(Arc::new(values));
        }
        // Same-width reinterpretations: narrow to the physical integer, then retype.
        DataType::Date32 | DataType::Time32(_) => DataType::Int32,
        DataType::Date64
        | DataType::Time64(_)
        | DataType::Timestamp(_, _)
        | DataType::Duration(_) => DataType::Int64,
        other => other.clone(),
    };
    let ints = Int64Array::new(images.into(), nulls);
    let narrowed = cast(&ints, &physical)?;
    if &physical == dt {
        return Ok(narrowed);
    }
    let data = narrowed
        .into_data()
        .into_builder()
        .data_type(dt.clone())
        .build()?;
    Ok(make_array(data))
}
