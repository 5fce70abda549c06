//! A join's build side on the device (ADR-0014, stage 3): the build input's device
//! batches are appended into one batch where they lie ([`append`]), the host reads back
//! only its key columns ([`download_columns`], 8 bytes a row each, for the dynamic filter
//! and for the digits of a key of several columns), and the table is built over the key
//! images ([`key_images`]: one column in place, or several combined by
//! `join_radix_keys`), so the build side never crosses to the host.
//!
//! Appending copies image columns and string bytes device to device; `shift_offsets`
//! moves each batch's string offsets past the bytes before it, and `append_bits` writes
//! its validity bits from the row where it starts (a bit position, not a byte).

use std::sync::Arc;

use arrow::array::ArrayRef;
use arrow::datatypes::SchemaRef;
use cudarc::driver::{CudaSlice, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{Dev, grid, unsupported};
use super::memory::{
    SyncOnExit, address, alloc_on_stream, batch_pool, copy_span, download_span, slice_address,
};
use crate::DeviceBuffer;
use crate::device_batch::{
    DeviceColumn, DeviceColumns, Layout, Span, ValueLayout, column_from_spans,
};
use crate::kernels::CudaKernel;
use crate::ops::{JoinKey, RadixDigit, ValueClass, value_class};

/// Device state of a built join table.
pub(crate) struct CudaJoinTable {
    pub(super) capacity: u64,
    pub(super) slot_state: CudaSlice<u32>,
    pub(super) slot_keys: CudaSlice<i64>,
    pub(super) slot_rows: CudaSlice<u32>,
}

impl CudaJoinTable {
    /// Device bytes held by the table.
    pub(crate) fn allocated_bytes(&self) -> usize {
        (self.capacity as usize) * (4 + 8 + 4)
    }
}

/// The Int64 keys a join reads from a device batch: device addresses of `rows` key
/// images and of their validity bitmap (0: none), and the buffers holding them when they
/// were computed (a key of several columns).
pub(super) struct KeyImages {
    pub(super) keys: u64,
    pub(super) valid: u64,
    _computed: Option<(CudaSlice<i64>, CudaSlice<u8>)>,
}

/// The keys of `batch` read as `key` says (`join_radix_keys` for several columns,
/// enqueued on `dev`'s stream).
pub(super) fn key_images(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    key: JoinKey<'_>,
) -> Result<KeyImages, EngineError> {
    let columns = batch.columns();
    let memory = batch.memory();
    let images = |c: usize| -> Result<(u64, u64), EngineError> {
        let column = columns.get(c).ok_or_else(|| EngineError::InvalidArgument {
            what: "join key column",
            detail: format!("column {c} of {}", columns.len()),
        })?;
        let ValueLayout::Images(span) = column.values else {
            return Err(unsupported(
                "a device join whose key is not held as 8-byte images",
            ));
        };
        let valid = column.validity.map_or(0, |v| address(memory, v.offset));
        Ok((address(memory, span.offset), valid))
    };
    match key {
        JoinKey::Column(c) => {
            let (keys, valid) = images(c)?;
            Ok(KeyImages {
                keys,
                valid,
                _computed: None,
            })
        }
        JoinKey::Radix(digits) => radix_keys(dev, batch.num_rows(), digits, images),
    }
}

/// Launches `join_radix_keys` over the digits' columns (addresses from `images`).
fn radix_keys(
    dev: &Dev<'_>,
    rows: usize,
    digits: &[RadixDigit],
    images: impl Fn(usize) -> Result<(u64, u64), EngineError>,
) -> Result<KeyImages, EngineError> {
    let parts = digits
        .iter()
        .map(|d| images(d.column))
        .collect::<Result<Vec<_>, _>>()?;
    let count = u32::try_from(digits.len()).map_err(|_| unsupported("too many key columns"))?;
    let cols: Vec<u64> = parts.iter().map(|p| p.0).collect();
    let valids: Vec<u64> = parts.iter().map(|p| p.1).collect();
    let mins: Vec<i64> = digits.iter().map(|d| d.min).collect();
    let spans: Vec<u64> = digits.iter().map(|d| d.span).collect();
    let strides: Vec<i64> = digits.iter().map(|d| d.stride).collect();
    let (d_cols, d_valids) = (dev.upload(&cols)?, dev.upload(&valids)?);
    let (d_mins, d_spans, d_strides) = (
        dev.upload(&mins)?,
        dev.upload(&spans)?,
        dev.upload(&strides)?,
    );
    let mut keys = dev.zeros::<i64>(rows)?;
    let mut bits = dev.zeros::<u8>(rows.div_ceil(8))?;
    let rows_u64 = rows as u64;
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_radix_keys")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&d_cols)
        .arg(&d_valids)
        .arg(&d_mins)
        .arg(&d_spans)
        .arg(&d_strides)
        .arg(&count)
        .arg(&rows_u64)
        .arg(&mut keys)
        .arg(&mut bits);
    // SAFETY: join_radix_keys(const u64*, const u64*, const i64*, const u64*, const i64*,
    // u32, u64, i64*, u8*): the five tables hold `count` entries, each column address
    // `rows` images of the batch (and each validity address 0 or its bitmap), keys holds
    // rows entries and bits ceil(rows/8); one thread per output byte, bounded by rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows.div_ceil(8))) }.map_err(dev.err("launch join_radix_keys"))?;
    // The tables above are freed on return: the kernel must have read them.
    dev.sync()?;
    Ok(KeyImages {
        keys: slice_address(dev, &keys),
        valid: slice_address(dev, &bits),
        _computed: Some((keys, bits)),
    })
}

/// Builds the table over the key of `batch`.
pub(super) fn build_table(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    key: JoinKey<'_>,
) -> Result<CudaJoinTable, EngineError> {
    let _finished = SyncOnExit(dev.stream);
    let keys = key_images(dev, batch, key)?;
    build_join_table_at(dev, keys.keys, keys.valid, batch.num_rows())
}

/// Columns `columns` of `batch` copied to the host, each from its own spans.
pub(super) fn download_columns(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    columns: &[usize],
) -> Result<Vec<ArrayRef>, EngineError> {
    let memory = batch.memory();
    columns
        .iter()
        .map(|c| {
            let column = batch
                .columns()
                .get(*c)
                .ok_or_else(|| EngineError::InvalidArgument {
                    what: "column",
                    detail: format!("column {c} of {}", batch.columns().len()),
                })?;
            let (values, text) = match column.values {
                ValueLayout::Images(span) | ValueLayout::Wide(span) => {
                    (download_span(dev, memory, span)?, Vec::new())
                }
                ValueLayout::Strings { offsets, bytes } => (
                    download_span(dev, memory, offsets)?,
                    download_span(dev, memory, bytes)?,
                ),
            };
            let validity = match column.validity {
                Some(span) => Some(download_span(dev, memory, span)?),
                None => None,
            };
            column_from_spans(
                column,
                batch.num_rows(),
                &values,
                &text,
                validity.as_deref(),
            )
        })
        .collect()
}

/// `batches` (each with `schema`) as one device batch, rows in order. A decimal column
/// some batch holds as 16-byte values is `Unsupported`: the caller builds on the host.
pub(super) fn append(
    dev: &Dev<'_>,
    batches: &[&DeviceColumns],
    schema: SchemaRef,
) -> Result<DeviceColumns, EngineError> {
    let _finished = SyncOnExit(dev.stream);
    let width = schema.fields().len();
    if let Some(b) = batches.iter().find(|b| b.columns().len() != width) {
        return Err(EngineError::InvalidArgument {
            what: "build batch",
            detail: format!("{} columns where the schema has {width}", b.columns().len()),
        });
    }
    let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
    let mut layout = Layout::new();
    let mut columns = Vec::with_capacity(width);
    for (c, field) in schema.fields().iter().enumerate() {
        let parts = batches.iter().map(|b| &b.columns()[c]);
        let nullable = parts.clone().any(|p| p.validity.is_some());
        // The field's type decides, so that a side of no batches is laid out as one
        // with rows would be.
        let strings = matches!(value_class(field.data_type()), Some(ValueClass::Str));
        let values = if strings {
            let mut bytes = 0usize;
            for p in parts.clone() {
                let ValueLayout::Strings { bytes: b, .. } = p.values else {
                    return Err(EngineError::Internal(
                        "a string column held another way in another batch".into(),
                    ));
                };
                bytes += b.len;
            }
            i32::try_from(bytes)
                .map_err(|_| unsupported("a build side with 2 GiB of strings in a column"))?;
            ValueLayout::Strings {
                offsets: layout.take((rows + 1) * 4),
                bytes: layout.take(bytes),
            }
        } else if parts
            .clone()
            .all(|p| matches!(p.values, ValueLayout::Images(_)))
        {
            ValueLayout::Images(layout.take(rows * 8))
        } else {
            return Err(unsupported(
                "a device join build over a decimal column a batch holds in 16 bytes",
            ));
        };
        columns.push(DeviceColumn {
            data_type: field.data_type().clone(),
            values,
            validity: nullable.then(|| layout.take(rows.div_ceil(8))),
        });
    }
    let mut memory = alloc_on_stream(dev, layout.size())?;
    let (mut at, mut string_at) = (0usize, vec![0usize; width]);
    for batch in batches {
        let n = batch.num_rows();
        for (c, (from, to)) in batch.columns().iter().zip(&columns).enumerate() {
            match (from.values, to.values) {
                (ValueLayout::Images(src), ValueLayout::Images(dst)) => {
                    let to_span = Span {
                        offset: dst.offset + at * 8,
                        len: n * 8,
                    };
                    copy_span(dev, batch.memory(), src, &mut memory, to_span)?;
                }
                (
                    ValueLayout::Strings { offsets, bytes },
                    ValueLayout::Strings {
                        offsets: dst_offsets,
                        bytes: dst_bytes,
                    },
                ) => {
                    let base = string_at[c];
                    shift_offsets(
                        dev,
                        address(batch.memory(), offsets.offset),
                        n + 1,
                        base,
                        address(&memory, dst_offsets.offset + at * 4),
                    )?;
                    let to_span = Span {
                        offset: dst_bytes.offset + base,
                        len: bytes.len,
                    };
                    copy_span(dev, batch.memory(), bytes, &mut memory, to_span)?;
                    string_at[c] += bytes.len;
                }
                _ => {
                    return Err(EngineError::Internal(
                        "appended device columns disagree".into(),
                    ));
                }
            }
            if let Some(dst) = to.validity {
                let src = from
                    .validity
                    .map_or(0, |span| address(batch.memory(), span.offset));
                append_bits(dev, src, n, &memory, dst, at)?;
            }
        }
        at += n;
    }
    dev.sync()?;
    Ok(DeviceColumns::from_parts(
        Arc::clone(&schema),
        rows,
        columns,
        memory,
        batch_pool(dev),
    ))
}

/// Enqueues `shift_offsets`: `n` offsets at `src` plus `base`, written at `dst`.
fn shift_offsets(
    dev: &Dev<'_>,
    src: u64,
    n: usize,
    base: usize,
    dst: u64,
) -> Result<(), EngineError> {
    let base = i32::try_from(base).map_err(|_| unsupported("string offsets past 2^31"))?;
    let n_u64 = n as u64;
    let f = dev
        .gpu
        .function(CudaKernel::FilterProject, "shift_offsets")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch.arg(&src).arg(&n_u64).arg(&base).arg(&dst);
    // SAFETY: shift_offsets(const i32*, u64, i32, i32*): `src` addresses a batch's `n`
    // offsets and `dst` `n` entries inside the appended batch's offsets span (laid out
    // for every batch's rows + 1); the kernel bounds its index by n.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch shift_offsets"))?;
    Ok(())
}

/// Enqueues `append_bits`: the `rows` validity bits at `src` (0: all valid) written from
/// bit `at` of span `dst` of `memory`.
fn append_bits(
    dev: &Dev<'_>,
    src: u64,
    rows: usize,
    memory: &DeviceBuffer,
    dst: Span,
    at: usize,
) -> Result<(), EngineError> {
    if rows == 0 {
        return Ok(());
    }
    if (at + rows).div_ceil(8) > dst.len {
        return Err(EngineError::Internal(format!(
            "validity bits {at}..{} past a span of {} bytes",
            at + rows,
            dst.len
        )));
    }
    let (rows_u64, at_u64, out) = (rows as u64, at as u64, address(memory, dst.offset));
    let f = dev.gpu.function(CudaKernel::FilterProject, "append_bits")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch.arg(&src).arg(&rows_u64).arg(&out).arg(&at_u64);
    // SAFETY: append_bits(const u8*, u64, u8*, u64): `src` is 0 or a bitmap of
    // ceil(rows/8) bytes; the kernel touches bytes at/8 ..= (at+rows-1)/8 of `out`, inside
    // the span (checked above). One thread per byte: rows/8 + 1 threads cover them.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows / 8 + 2)) }.map_err(dev.err("launch append_bits"))?;
    Ok(())
}

/// Builds the table over `rows` Int64 keys at device address `keys` (validity bitmap at
/// `valid`, 0 for none: NULL keys are not inserted); waits for the build, so the
/// addresses need to stay valid only until this returns.
pub(super) fn build_join_table_at(
    dev: &Dev<'_>,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<CudaJoinTable, EngineError> {
    if rows >= u32::MAX as usize / 2 {
        return Err(unsupported("join build side over 2^31 rows"));
    }
    let capacity = (rows.max(1) * 2).next_power_of_two();
    let (mut slot_state, mut slot_keys, mut slot_rows) = (
        dev.zeros::<u32>(capacity)?,
        dev.zeros::<i64>(capacity)?,
        dev.zeros::<u32>(capacity)?,
    );
    let capacity_u64 = capacity as u64;
    if rows > 0 {
        let rows_u64 = rows as u64;
        let f = dev.gpu.function(CudaKernel::HashJoin, "join_build")?;
        let mut launch = dev.stream.launch_builder(&f);
        launch
            .arg(&keys)
            .arg(&valid)
            .arg(&rows_u64)
            .arg(&capacity_u64)
            .arg(&mut slot_state)
            .arg(&mut slot_keys)
            .arg(&mut slot_rows);
        // SAFETY: join_build(const i64*, const u8*, u64, u64, u32*, i64*, u32*): `keys`
        // addresses `rows` keys and `valid` a bitmap of ceil(rows/8) bytes or 0 (the
        // caller's contract), the three slot arrays hold `capacity` entries (a power of
        // two above rows, so every insert finds a slot) and the kernel masks every index.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_build"))?;
        dev.sync()?;
    }
    Ok(CudaJoinTable {
        capacity: capacity_u64,
        slot_state,
        slot_keys,
        slot_rows,
    })
}
