//! A join's build side on the device (ADR-0014, stage 3): the build input's device
//! batches are appended into one batch where they lie, and the table is built over its
//! key images, so the build side never crosses to the host. Only the key column comes
//! back (8 bytes a row and its validity), for the join's dynamic filter and for a CPU
//! table should the device fail a probe.
//!
//! Appending copies image columns and string bytes device to device; `shift_offsets`
//! moves each batch's string offsets past the bytes before it, and `append_bits` writes
//! its validity bits from the row where it starts (a bit position, not a byte).

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use cudarc::driver::PushKernelArg;
use oxidelake_core::EngineError;

use super::launch::{Dev, build_join_table_at, grid, unsupported};
use super::resident_memory::{SyncOnExit, address, alloc_on_stream, copy_span, download_span};
use crate::DeviceBuffer;
use crate::kernels::CudaKernel;
use crate::ops::ResidentBuild;
use crate::resident::{DeviceBatch, Layout, ResidentColumn, ResidentValues, Span, image_column};

/// See the module docs.
pub(super) fn build_resident(
    dev: &Dev<'_>,
    batches: &[DeviceBatch],
    schema: SchemaRef,
    key: usize,
) -> Result<ResidentBuild, EngineError> {
    let _finished = SyncOnExit(dev.stream);
    let batch = append(dev, batches, schema)?;
    let column = batch
        .columns()
        .get(key)
        .ok_or_else(|| EngineError::InvalidArgument {
            what: "join key column",
            detail: format!("column {key} of {}", batch.columns().len()),
        })?;
    let ResidentValues::Images(images) = column.values else {
        return Err(unsupported(
            "a device join build whose key is not held as 8-byte images",
        ));
    };
    let rows = batch.num_rows();
    let memory = batch.memory();
    let valid = column
        .validity
        .map_or(0, |span| address(memory, span.offset));
    let table = build_join_table_at(dev, address(memory, images.offset), valid, rows)?;
    let validity = match column.validity {
        Some(span) => Some(download_span(dev, memory, span)?),
        None => None,
    };
    let keys = image_column(
        &download_span(dev, memory, images)?,
        validity.as_deref(),
        rows,
        &column.data_type,
    )?;
    let table = crate::JoinTable {
        device: dev.backend.device,
        build_rows: rows,
        allocated_bytes: table.allocated_bytes(),
        inner: crate::handles::JoinTableInner::Cuda(table),
    };
    Ok(ResidentBuild { table, batch, keys })
}

/// `batches` (each with `schema`) as one device batch, rows in order. A decimal column
/// some batch holds as 16-byte values is `Unsupported`: the caller builds on the host.
fn append(
    dev: &Dev<'_>,
    batches: &[DeviceBatch],
    schema: SchemaRef,
) -> Result<DeviceBatch, EngineError> {
    let width = schema.fields().len();
    if let Some(b) = batches.iter().find(|b| b.columns().len() != width) {
        return Err(EngineError::InvalidArgument {
            what: "build batch",
            detail: format!("{} columns where the schema has {width}", b.columns().len()),
        });
    }
    let rows: usize = batches.iter().map(DeviceBatch::num_rows).sum();
    let mut layout = Layout::new();
    let mut columns = Vec::with_capacity(width);
    for (c, field) in schema.fields().iter().enumerate() {
        let parts = batches.iter().map(|b| &b.columns()[c]);
        let nullable = parts.clone().any(|p| p.validity.is_some());
        let values = match batches.first().map(|b| b.columns()[c].values) {
            Some(ResidentValues::Strings { .. }) => {
                let mut bytes = 0usize;
                for p in parts.clone() {
                    let ResidentValues::Strings { bytes: b, .. } = p.values else {
                        return Err(EngineError::Internal(
                            "a string column held another way in another batch".into(),
                        ));
                    };
                    bytes += b.len;
                }
                i32::try_from(bytes)
                    .map_err(|_| unsupported("a build side with 2 GiB of strings in a column"))?;
                ResidentValues::Strings {
                    offsets: layout.take((rows + 1) * 4),
                    bytes: layout.take(bytes),
                }
            }
            _ if parts
                .clone()
                .all(|p| matches!(p.values, ResidentValues::Images(_))) =>
            {
                ResidentValues::Images(layout.take(rows * 8))
            }
            _ => {
                return Err(unsupported(
                    "a device join build over a decimal column a batch holds in 16 bytes",
                ));
            }
        };
        columns.push(ResidentColumn {
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
                (ResidentValues::Images(src), ResidentValues::Images(dst)) => {
                    let to_span = Span {
                        offset: dst.offset + at * 8,
                        len: n * 8,
                    };
                    copy_span(dev, batch.memory(), src, &mut memory, to_span)?;
                }
                (
                    ResidentValues::Strings { offsets, bytes },
                    ResidentValues::Strings {
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
                        "appended resident columns disagree".into(),
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
    Ok(DeviceBatch::from_parts(
        Arc::clone(&schema),
        rows,
        columns,
        memory,
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
        .backend
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
    let f = dev
        .backend
        .function(CudaKernel::FilterProject, "append_bits")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch.arg(&src).arg(&rows_u64).arg(&out).arg(&at_u64);
    // SAFETY: append_bits(const u8*, u64, u8*, u64): `src` is 0 or a bitmap of
    // ceil(rows/8) bytes; the kernel touches bytes at/8 ..= (at+rows-1)/8 of `out`, inside
    // the span (checked above). One thread per byte: rows/8 + 1 threads cover them.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows / 8 + 2)) }.map_err(dev.err("launch append_bits"))?;
    Ok(())
}
