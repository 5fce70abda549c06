//! Gathering rows of a device-resident batch into a new one (ADR-0014), for the resident
//! filter (its kept rows) and the resident aggregate (each group's first row): images
//! with `gather_8byte`, validity bitmaps with `gather_bits`, strings by their lengths, a
//! scan of those and their bytes (`gather_string_lengths`, `exclusive_scan_blocks`,
//! `gather_string_bytes`).
//!
//! In two steps, because the output's allocation needs each string column's byte total,
//! which only the device knows: [`string_extents`] scans the lengths across the grid
//! ([`scan_any_length`]) and reads back the totals (4 bytes a string column), the
//! caller lays out and allocates the output, and [`gather_columns`] fills it.
//! [`list_flagged`] makes the row list from one flag byte per row.

use cudarc::driver::{CudaSlice, PushKernelArg};
use oxidelake_core::EngineError;

use super::gpu::{BLOCK, Dev, grid, one_block, unsupported};
use super::memory::address;
use crate::DeviceBuffer;
use crate::device_batch::{DeviceColumn, DeviceColumns, ValueLayout};
use crate::kernels::CudaKernel;

/// Scans the first `len` entries of `values` (which holds `len + 1`) into exclusive
/// prefix sums in one block, writing their total at index `len`
/// (`exclusive_scan_blocks`).
pub(super) fn scan_one_block(
    dev: &Dev<'_>,
    values: &mut CudaSlice<u32>,
    len: u32,
) -> Result<(), EngineError> {
    if values.len() <= len as usize {
        return Err(EngineError::Internal(format!(
            "a scan of {len} entries in a buffer of {}",
            values.len()
        )));
    }
    let scan = dev
        .gpu
        .function(CudaKernel::FilterProject, "exclusive_scan_blocks")?;
    let mut launch = dev.stream.launch_builder(&scan);
    launch.arg(values).arg(&len);
    // SAFETY: exclusive_scan_blocks(u32*, u32) runs as one block and touches indices
    // 0..=len of values, which holds more than len entries (checked above).
    #[allow(unsafe_code)]
    unsafe { launch.launch(one_block()) }.map_err(dev.err("launch exclusive_scan_blocks"))?;
    Ok(())
}

/// Scans the first `len` entries of `values` (which holds `len + 1`) into exclusive
/// prefix sums across the grid, writing their total at index `len`: `scan_blocks_u32`
/// per block, [`scan_one_block`] over the block totals, `add_block_offsets_u32`. Unlike
/// [`scan_one_block`] over the values themselves, a million-row batch keeps every
/// multiprocessor busy.
pub(super) fn scan_any_length(
    dev: &Dev<'_>,
    values: &mut CudaSlice<u32>,
    len: u32,
) -> Result<(), EngineError> {
    let n = len as usize;
    if values.len() <= n {
        return Err(EngineError::Internal(format!(
            "a scan of {len} entries in a buffer of {}",
            values.len()
        )));
    }
    // Blocks cover index `len` too: the last launch writes the total there.
    let blocks = (n + 1).div_ceil(BLOCK as usize);
    let blocks_u32 =
        u32::try_from(blocks).map_err(|_| unsupported("batch too large for one launch"))?;
    let mut totals: CudaSlice<u32> = dev.zeros(blocks + 1)?;
    let per_block = dev
        .gpu
        .function(CudaKernel::FilterProject, "scan_blocks_u32")?;
    let mut launch = dev.stream.launch_builder(&per_block);
    launch.arg(&mut *values).arg(&len).arg(&mut totals);
    // SAFETY: scan_blocks_u32(u32*, u32, u32*): a grid of `blocks` blocks of BLOCK
    // (= FP_BLOCK) threads; values holds len + 1 entries and is read and written below
    // len, totals holds blocks + 1.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(n + 1)) }.map_err(dev.err("launch scan_blocks_u32"))?;
    scan_one_block(dev, &mut totals, blocks_u32)?;
    let add = dev
        .gpu
        .function(CudaKernel::FilterProject, "add_block_offsets_u32")?;
    let mut launch = dev.stream.launch_builder(&add);
    launch
        .arg(&mut *values)
        .arg(&len)
        .arg(&totals)
        .arg(&blocks_u32);
    // SAFETY: add_block_offsets_u32(u32*, u32, const u32*, u32): the same grid; it
    // writes values[i] for i <= len (len + 1 entries) and reads totals[blockIdx.x] and
    // totals[blocks], which holds blocks + 1 entries.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(n + 1)) }.map_err(dev.err("launch add_block_offsets_u32"))?;
    Ok(())
}

/// The indices of the non-zero bytes among the `n` of `flags`, in order, and how many
/// there are (read back, 4 bytes: what the caller allocates for depends on it):
/// `count_flags` per block, [`scan_one_block`] over the block totals, `compact_rows`.
pub(super) fn list_flagged(
    dev: &Dev<'_>,
    flags: &CudaSlice<u8>,
    n: usize,
) -> Result<(CudaSlice<u32>, usize), EngineError> {
    let stream = dev.stream;
    if flags.len() < n {
        return Err(EngineError::Internal(format!(
            "{n} flags in a buffer of {}",
            flags.len()
        )));
    }
    let blocks = n.div_ceil(BLOCK as usize).max(1);
    let blocks_u32 =
        u32::try_from(blocks).map_err(|_| unsupported("too many rows for one launch"))?;
    let n_u64 = n as u64;
    let mut block_counts = dev.zeros::<u32>(blocks + 1)?;
    let mut listed = dev.zeros::<u32>(n)?;
    let count = dev.gpu.function(CudaKernel::FilterProject, "count_flags")?;
    let mut launch = stream.launch_builder(&count);
    launch
        .arg(flags)
        .arg(&n_u64)
        .arg(&mut block_counts)
        .arg(&blocks_u32);
    // SAFETY: count_flags(const u8*, u64, u32*, u32): flags has >= n bytes (checked
    // above), block_counts blocks + 1 entries, and the grid has `blocks` blocks.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch count_flags"))?;
    scan_one_block(dev, &mut block_counts, blocks_u32)?;
    let compact = dev
        .gpu
        .function(CudaKernel::FilterProject, "compact_rows")?;
    let mut launch = stream.launch_builder(&compact);
    launch
        .arg(flags)
        .arg(&n_u64)
        .arg(&block_counts)
        .arg(&blocks_u32)
        .arg(&mut listed)
        .arg(&n_u64);
    // SAFETY: compact_rows(const u8*, u64, const u32*, u32, u32*, u64): listed holds
    // max(n, 1) entries and the kernel checks each destination against n.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(n)) }.map_err(dev.err("launch compact_rows"))?;
    let total = stream
        .clone_dtoh(&block_counts.slice(blocks..blocks + 1))
        .map_err(dev.err("cuMemcpyDtoH"))?;
    super::transfers::device_to_host(4);
    Ok((listed, total.first().copied().unwrap_or(0) as usize))
}

/// One gathered column's string extent: the scanned lengths of the gathered rows (their
/// output offsets, `rows + 1` entries) and the bytes they total; `None` and 0 for a
/// column that is not a string column.
pub(super) struct StringExtent {
    starts: Option<CudaSlice<u32>>,
    /// The gathered strings' byte total.
    pub(super) bytes: usize,
}

/// The string extents of columns `sources` of `batch` gathered at the `rows` indices of
/// `row_list` (below `batch.num_rows()`).
pub(super) fn string_extents(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    sources: &[usize],
    row_list: &CudaSlice<u32>,
    rows: usize,
) -> Result<Vec<StringExtent>, EngineError> {
    let stream = dev.stream;
    let (in_rows, rows_u64) = (batch.num_rows() as u64, rows as u64);
    let scan_len =
        u32::try_from(rows).map_err(|_| unsupported("batch too large for one launch"))?;
    let mut extents = Vec::with_capacity(sources.len());
    for source in sources {
        let ValueLayout::Strings { offsets, .. } = batch.columns()[*source].values else {
            extents.push(StringExtent {
                starts: None,
                bytes: 0,
            });
            continue;
        };
        let mut lengths: CudaSlice<u32> = stream
            .alloc_zeros(rows + 1)
            .map_err(dev.err("cuMemAlloc"))?;
        if rows > 0 {
            let in_offsets = address(batch.memory(), offsets.offset);
            let kernel = dev
                .gpu
                .function(CudaKernel::FilterProject, "gather_string_lengths")?;
            let mut launch = stream.launch_builder(&kernel);
            launch
                .arg(&in_offsets)
                .arg(&in_rows)
                .arg(row_list)
                .arg(&rows_u64)
                .arg(&mut lengths);
            // SAFETY: gather_string_lengths(const i32*, u64, const u32*, u64, u32*):
            // `in_offsets` addresses the column's in_rows + 1 offsets in the input batch,
            // row_list holds >= rows indices below in_rows, lengths holds rows + 1
            // entries, and the kernel bounds its index by rows.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows)) }
                .map_err(dev.err("launch gather_string_lengths"))?;
            scan_any_length(dev, &mut lengths, scan_len)?;
        }
        let total = stream
            .clone_dtoh(&lengths.slice(rows..rows + 1))
            .map_err(dev.err("cuMemcpyDtoH"))?;
        super::transfers::device_to_host(4);
        extents.push(StringExtent {
            starts: Some(lengths),
            bytes: total.first().copied().unwrap_or(0) as usize,
        });
    }
    Ok(extents)
}

/// Gathers columns `sources` of `batch` at the `rows` indices of `row_list` into the
/// columns `out` of `memory` (laid out for `rows` rows and the byte totals of
/// `extents`, which [`string_extents`] computed for the same rows). Enqueued on the
/// stream; the caller synchronises.
#[allow(clippy::too_many_arguments)]
pub(super) fn gather_columns(
    dev: &Dev<'_>,
    batch: &DeviceColumns,
    sources: &[usize],
    row_list: &CudaSlice<u32>,
    rows: usize,
    extents: &[StringExtent],
    out: &[DeviceColumn],
    memory: &DeviceBuffer,
) -> Result<(), EngineError> {
    if rows == 0 {
        return Ok(());
    }
    let stream = dev.stream;
    let (in_rows, rows_u64) = (batch.num_rows() as u64, rows as u64);
    let gather_grid = grid(rows);
    let mut scratch_valid: CudaSlice<u8> =
        stream.alloc_zeros(rows).map_err(dev.err("cuMemAlloc"))?;
    for ((source, out), extent) in sources.iter().zip(out).zip(extents) {
        let input = &batch.columns()[*source];
        let in_validity = input
            .validity
            .map_or(0, |span| address(batch.memory(), span.offset));
        match (input.values, out.values, &extent.starts) {
            (ValueLayout::Images(from), ValueLayout::Images(to), _) => {
                let values = address(batch.memory(), from.offset);
                let out_values = address(memory, to.offset);
                let kernel = dev
                    .gpu
                    .function(CudaKernel::FilterProject, "gather_8byte")?;
                let mut launch = stream.launch_builder(&kernel);
                launch
                    .arg(&values)
                    .arg(&in_validity)
                    .arg(&in_rows)
                    .arg(row_list)
                    .arg(&rows_u64)
                    .arg(&out_values)
                    .arg(&mut scratch_valid);
                // SAFETY: gather_8byte(const i64*, const u8*, u64, const u32*, u64, i64*,
                // u8*): `values` addresses the column's in_rows images in the input batch
                // and `in_validity` its bitmap of ceil(in_rows/8) bytes or 0 (no NULLs);
                // row_list holds >= rows indices below in_rows; `out_values` addresses
                // the rows images of the output span (`Layout::column_like`);
                // scratch_valid holds rows bytes.
                #[allow(unsafe_code)]
                unsafe { launch.launch(gather_grid) }.map_err(dev.err("launch gather_8byte"))?;
            }
            (
                ValueLayout::Strings { offsets, bytes },
                ValueLayout::Strings {
                    offsets: out_offsets,
                    bytes: out_bytes,
                },
                Some(starts),
            ) => {
                let (in_offsets, in_bytes) = (
                    address(batch.memory(), offsets.offset),
                    address(batch.memory(), bytes.offset),
                );
                let (out_offsets, out_bytes) = (
                    address(memory, out_offsets.offset),
                    address(memory, out_bytes.offset),
                );
                let kernel = dev
                    .gpu
                    .function(CudaKernel::FilterProject, "gather_string_bytes")?;
                let mut launch = stream.launch_builder(&kernel);
                launch
                    .arg(&in_offsets)
                    .arg(&in_bytes)
                    .arg(&in_rows)
                    .arg(row_list)
                    .arg(starts)
                    .arg(&rows_u64)
                    .arg(&out_offsets)
                    .arg(&out_bytes);
                // SAFETY: gather_string_bytes(const i32*, const u8*, u64, const u32*,
                // const u32*, u64, i32*, u8*): the input offsets (in_rows + 1, from 0)
                // and bytes lie in the input batch; `starts` holds rows + 1 scanned
                // lengths of exactly these rows, whose total sized the output bytes span;
                // the output offsets span holds rows + 1 entries; the kernel bounds its
                // index by rows.
                #[allow(unsafe_code)]
                unsafe { launch.launch(gather_grid) }
                    .map_err(dev.err("launch gather_string_bytes"))?;
            }
            _ => {
                return Err(EngineError::Internal(
                    "device gather: column layouts disagree".into(),
                ));
            }
        }
        if let Some(to) = out.validity {
            let out_bits = address(memory, to.offset);
            let kernel = dev.gpu.function(CudaKernel::FilterProject, "gather_bits")?;
            let mut launch = stream.launch_builder(&kernel);
            launch
                .arg(&in_validity)
                .arg(&in_rows)
                .arg(row_list)
                .arg(&rows_u64)
                .arg(&out_bits);
            // SAFETY: gather_bits(const u8*, u64, const u32*, u64, u8*): the input bitmap
            // covers in_rows bits (or is 0), row_list holds >= rows indices, and the
            // output span holds ceil(rows/8) bytes, one per thread.
            #[allow(unsafe_code)]
            unsafe { launch.launch(grid(rows.div_ceil(8))) }
                .map_err(dev.err("launch gather_bits"))?;
        }
    }
    Ok(())
}
