//! A host batch as a [`DeviceBatch`] (module docs of `device_batch`): wrapped on a backend
//! that keeps its batches on the host; otherwise each column packed into one staging
//! buffer in the kernels' format, then one host-to-device copy into one allocation.
//!
//! A column of images whose valid values lie close together crosses narrow: as 1-, 2-
//! or 4-byte offsets from its smallest image, which the backend widens into the
//! column's 8-byte images where they landed ([`GpuBackend::widen_images`]). Dates,
//! 32-bit integers, small decimals and the keys of a batch of neighbouring rows cross
//! in half the bytes or less; the device holds both forms until the batch is dropped.

use arrow::array::{Array, AsArray, StringArray};
use arrow::buffer::{BooleanBuffer, NullBuffer};
use arrow::datatypes::Decimal128Type;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use super::{
    DeviceBatch, DeviceColumn, DeviceColumns, Layout, Span, StagingPool, ValueLayout, Widening,
    check_device_schema, staging_buffer,
};
use crate::ops::{ValueClass, is_overflow, load_images, string_column, value_class};
use crate::{DeviceStream, GpuBackend};

/// A column whose narrow form would save fewer bytes than this crosses at full width:
/// its widening is one more launch, whose fixed cost (a few microseconds) is about what
/// a PCIe 4.0 x16 link takes to move 64 KiB.
const MIN_NARROWING_SAVING: usize = 64 << 10;

/// A column's parts as they are written into the staging buffer.
enum HostParts {
    Images(Vec<i64>),
    /// Images crossing as `width`-byte offsets from `base`.
    Narrow {
        images: Vec<i64>,
        base: i64,
        width: usize,
    },
    Wide(Vec<i128>),
    Strings(StringArray),
}

/// Where a column's values cross the bus: in their device layout, or as the offsets a
/// widening turns into images.
enum Crossing {
    Values(ValueLayout),
    Narrow(Span),
}

/// The base and width (1, 2 or 4 bytes) of offsets that hold every valid image of a
/// column, where they need fewer than 8 bytes (a column without a valid row: base 0,
/// width 1). The difference is taken on the images' bits, so floats narrow too when
/// their bits lie close.
fn narrowing(images: &[i64], nulls: Option<&NullBuffer>) -> Option<(i64, usize)> {
    let bounds = |(lo, hi): (i64, i64), v: &i64| (lo.min(*v), hi.max(*v));
    let (min, max) = match nulls {
        None => images.iter().fold((i64::MAX, i64::MIN), bounds),
        Some(nulls) => images
            .iter()
            .zip(nulls.iter())
            .filter(|(_, valid)| *valid)
            .map(|(v, _)| v)
            .fold((i64::MAX, i64::MIN), bounds),
    };
    if min > max {
        return Some((0, 1));
    }
    let width = match max.wrapping_sub(min) as u64 {
        0..=0xFF => 1,
        0x100..=0xFFFF => 2,
        0x1_0000..=0xFFFF_FFFF => 4,
        _ => return None,
    };
    Some((min, width))
}

/// Writes each image's offset from `base` as `width` little-endian bytes.
fn write_offsets(out: &mut [u8], images: &[i64], base: i64, width: usize) {
    let offsets = images.iter().map(|v| v.wrapping_sub(base) as u64);
    match width {
        1 => out.iter_mut().zip(offsets).for_each(|(o, v)| *o = v as u8),
        2 => out
            .chunks_exact_mut(2)
            .zip(offsets)
            .for_each(|(o, v)| o.copy_from_slice(&(v as u16).to_le_bytes())),
        _ => out
            .chunks_exact_mut(4)
            .zip(offsets)
            .for_each(|(o, v)| o.copy_from_slice(&(v as u32).to_le_bytes())),
    }
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
    // What crosses the bus first (values, offsets, validity, string bytes), then the
    // images the narrow columns widen into, which only the device writes.
    let mut layout = Layout::new();
    let mut parts = Vec::with_capacity(batch.num_columns());
    for column in batch.columns() {
        let (part, crossing, nulls) = match value_class(column.data_type()) {
            Some(ValueClass::Str) => {
                let strings = string_column(column.as_ref())?;
                let offsets = strings.value_offsets();
                let bytes = (offsets[rows] - offsets[0]) as usize;
                let values = ValueLayout::Strings {
                    offsets: layout.take((rows + 1) * 4),
                    bytes: layout.take(bytes),
                };
                let nulls = strings.nulls().filter(|n| n.null_count() > 0).cloned();
                (HostParts::Strings(strings), Crossing::Values(values), nulls)
            }
            // Exact images; a decimal with a valid value beyond 64 bits (the only
            // overflow `load_images` reports) keeps its 16-byte values.
            _ => {
                let nulls = column.logical_nulls().filter(|n| n.null_count() > 0);
                match load_images(column.as_ref()) {
                    Ok(images) => match narrowing(&images, nulls.as_ref()) {
                        Some((base, width)) if rows * (8 - width) >= MIN_NARROWING_SAVING => {
                            let offsets = Crossing::Narrow(layout.take(rows * width));
                            let part = HostParts::Narrow {
                                images,
                                base,
                                width,
                            };
                            (part, offsets, nulls)
                        }
                        _ => {
                            let values = ValueLayout::Images(layout.take(rows * 8));
                            (HostParts::Images(images), Crossing::Values(values), nulls)
                        }
                    },
                    Err(err) if is_overflow(&err) => {
                        let wide = column.as_primitive::<Decimal128Type>().values().to_vec();
                        let values = ValueLayout::Wide(layout.take(rows * 16));
                        (HostParts::Wide(wide), Crossing::Values(values), nulls)
                    }
                    Err(err) => return Err(err),
                }
            }
        };
        // Only a column holding a NULL carries a bitmap (`nulls` is `None` otherwise).
        let validity = nulls.as_ref().map(|_| layout.take(rows.div_ceil(8)));
        parts.push((part, crossing, nulls, validity));
    }
    let crossing_size = layout.size();
    // A pooled buffer holds an earlier batch's bytes: every span is written below, and
    // nothing reads the gaps between spans.
    let mut staging = staging_buffer(backend, pool, crossing_size)?;
    let out = staging.as_mut_slice()?;
    for (part, crossing, nulls, validity) in &parts {
        match (part, crossing) {
            (HostParts::Images(images), Crossing::Values(ValueLayout::Images(span))) => {
                for (dst, v) in out[span.range()].chunks_exact_mut(8).zip(images) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
            (
                HostParts::Narrow {
                    images,
                    base,
                    width,
                },
                Crossing::Narrow(span),
            ) => write_offsets(&mut out[span.range()], images, *base, *width),
            (HostParts::Wide(values), Crossing::Values(ValueLayout::Wide(span))) => {
                for (dst, v) in out[span.range()].chunks_exact_mut(16).zip(values) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
            (
                HostParts::Strings(strings),
                Crossing::Values(ValueLayout::Strings { offsets, bytes }),
            ) => {
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
        if let (Some(nulls), Some(span)) = (nulls, validity) {
            out[span.range()].copy_from_slice(&validity_bytes(nulls));
        }
    }
    // The narrow columns' images go after the crossing spans. The staging buffer is a
    // size class, so its copy may also write the first of them with its tail; the
    // widenings run after the copy on the same stream and write every image.
    let mut widenings = Vec::new();
    let mut columns = Vec::with_capacity(parts.len());
    for ((part, crossing, _, validity), column) in parts.iter().zip(batch.columns()) {
        let values = match (crossing, part) {
            (Crossing::Values(values), _) => *values,
            (Crossing::Narrow(narrow), HostParts::Narrow { base, width, .. }) => {
                let images = layout.take(rows * 8);
                widenings.push(Widening {
                    narrow: *narrow,
                    width: *width,
                    base: *base,
                    images,
                });
                ValueLayout::Images(images)
            }
            (Crossing::Narrow(_), _) => {
                return Err(EngineError::Internal(
                    "a narrow crossing without its offsets".into(),
                ));
            }
        };
        columns.push(DeviceColumn {
            data_type: column.data_type().clone(),
            values,
            validity: *validity,
        });
    }
    let size = layout.size();
    // The copy writes every byte it crosses and the widenings every image: a pooled
    // allocation needs no reset.
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
    if !widenings.is_empty() {
        backend.widen_images(stream, &mut memory, &widenings)?;
    }
    // The staging buffer is freed or reused on return: the copy must have read it.
    backend.synchronize(stream)?;
    if let Some(pool) = pool {
        pool.give(staging);
    }
    Ok(
        DeviceColumns::from_parts(batch.schema(), rows, columns, memory, device_pool)
            .uploaded(crossing_size),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_are_as_narrow_as_the_spread_of_the_valid_images_allows() {
        assert_eq!(narrowing(&[7, 7, 7], None), Some((7, 1)));
        assert_eq!(narrowing(&[-100, 155], None), Some((-100, 1)));
        assert_eq!(narrowing(&[-100, 156], None), Some((-100, 2)));
        assert_eq!(narrowing(&[9000, 74_535], None), Some((9000, 2)));
        assert_eq!(narrowing(&[9000, 74_536], None), Some((9000, 4)));
        assert_eq!(
            narrowing(&[i64::MIN, i64::MIN + 0xFFFF_FFFF], None),
            Some((i64::MIN, 4))
        );
        assert_eq!(narrowing(&[0, 1 << 32], None), None);
        assert_eq!(narrowing(&[i64::MIN, i64::MAX], None), None);
        // A NULL's value does not count; a column of NULLs only narrows to one byte.
        let nulls = NullBuffer::from(vec![true, false, true]);
        assert_eq!(narrowing(&[5, i64::MAX, 6], Some(&nulls)), Some((5, 1)));
        let none = NullBuffer::from(vec![false, false]);
        assert_eq!(narrowing(&[1, i64::MAX], Some(&none)), Some((0, 1)));
        assert_eq!(narrowing(&[], None), Some((0, 1)));
    }

    #[test]
    fn offsets_wrap_back_to_each_image_from_the_base() {
        // Neighbouring floats' bits (negative as i64) narrow like any other images.
        let float = f64::to_bits(-2.5) as i64;
        let floats = [float, float + 200, float + 7];
        for (values, base, width) in [
            (&[i64::MAX, i64::MAX - 3][..], i64::MAX - 3, 1),
            (&floats[..], float, 1),
            (&[-5i64, 60_000][..], -5, 2),
            (&[i64::MIN, i64::MIN + 70_000][..], i64::MIN, 4),
        ] {
            assert_eq!(narrowing(values, None), Some((base, width)));
            // The offsets at 0, the images at 128, widened by the host reference.
            let rows = values.len();
            let mut memory = vec![0u8; 128 + rows * 8];
            write_offsets(&mut memory[..rows * width], values, base, width);
            let widening = Widening {
                narrow: Span {
                    offset: 0,
                    len: rows * width,
                },
                width,
                base,
                images: Span {
                    offset: 128,
                    len: rows * 8,
                },
            };
            crate::backend::host_widen_images(&mut memory, &[widening]);
            let back: Vec<i64> = memory[128..]
                .chunks_exact(8)
                .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                .collect();
            assert_eq!(back, values);
        }
    }
}
