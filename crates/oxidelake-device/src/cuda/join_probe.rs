//! The CUDA join of a probe batch with a build batch, both on the device ([`join`],
//! ADR-0015): the probe key images are probed where they lie (`join_probe_count`,
//! `join_probe_write`), the match counts scanned on the device ([`probe_pairs`]: only
//! their total comes back), and each output column gathered from its side at the
//! pairs' build or probe rows (`gather`); the joined batch stays on the device. An
//! output column can be the pairs' row numbers themselves (`join_row_images`): the host
//! edge joins host keys asking for those, so what comes back is each pair's rows.
//!
//! A semi or anti join needs no pairs: `join_match_flags` marks the probe rows with (or
//! without) a match from their counts, `gather::list_flagged` lists them (their
//! number is the one readback besides string byte totals), and the gather brings back
//! those rows.

use arrow::datatypes::DataType;
use oxidelake_core::EngineError;

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::gather::{gather_columns, list_flagged, string_extents};
use super::gpu::{BLOCK, Dev, grid, one_block, unsupported};
use super::join_build::{CudaJoinTable, key_images};
use super::memory::{SyncOnExit, address, alloc_on_stream, batch_pool};
use crate::device_batch::{DeviceColumn, DeviceColumns, Layout, Span, ValueLayout};
use crate::kernels::CudaKernel;
use crate::ops::validate;
use crate::ops::{JoinArgs, JoinColumn, JoinKey, ProbeRows};

/// The probe rows an output takes (one per pair, or the matched / unmatched rows), how
/// many, and for pairs each one's build row.
struct ProbedRows {
    probe: CudaSlice<u32>,
    len: usize,
    build: Option<CudaSlice<u32>>,
}

/// Probes `table` with the key of `batch` read as `key` says; `None` when no row is
/// taken.
fn probe_rows(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    batch: &DeviceColumns,
    key: JoinKey<'_>,
    which: ProbeRows,
) -> Result<Option<ProbedRows>, EngineError> {
    let rows = batch.num_rows();
    u32::try_from(rows).map_err(|_| unsupported("a batch of 2^32 rows or more"))?;
    // Held until the probe has read the keys (it waits for its kernels).
    let images = key_images(dev, batch, key)?;
    let (keys, valid) = (images.keys, images.valid);
    Ok(match which {
        ProbeRows::Pairs => probe_pairs(dev, table, keys, valid, rows)?.map(|pairs| ProbedRows {
            probe: pairs.probe,
            len: pairs.len,
            build: Some(pairs.build),
        }),
        ProbeRows::Matched | ProbeRows::Unmatched => {
            if rows == 0 {
                return Ok(None);
            }
            let counts = probe_counts(dev, table, keys, valid, rows)?;
            let flags = match_flags(dev, &counts, rows, which == ProbeRows::Matched)?;
            let (list, len) = list_flagged(dev, &flags, rows)?;
            (len > 0).then_some(ProbedRows {
                probe: list,
                len,
                build: None,
            })
        }
    })
}

/// Checks that every column in `gather` exists and none is held as 16-byte values (the
/// key columns are checked where they are read).
fn check_gather(batch: &DeviceColumns, gather: &[usize]) -> Result<(), EngineError> {
    let columns = batch.columns();
    if let Some(c) = gather.iter().find(|c| **c >= columns.len()) {
        return Err(EngineError::InvalidArgument {
            what: "probe column",
            detail: format!("column {c} of {}", columns.len()),
        });
    }
    wide_free(batch, gather)
}

/// Fails with `Unsupported` when a column of `batch` in `gather` is held as 16-byte
/// values (no gather kernel moves them).
fn wide_free(batch: &DeviceColumns, gather: &[usize]) -> Result<(), EngineError> {
    let columns = batch.columns();
    if gather.iter().any(|c| {
        matches!(
            columns.get(*c).map(|c| c.values),
            Some(ValueLayout::Wide(_)) | None
        )
    }) {
        return Err(unsupported(
            "a device join gathering a decimal column whose batch needs more than 64 bits",
        ));
    }
    Ok(())
}

/// See the module docs.
pub(super) fn join(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    build: Option<&DeviceColumns>,
    probe: &DeviceColumns,
    args: JoinArgs<'_>,
) -> Result<DeviceColumns, EngineError> {
    validate::join_output(&args)?;
    let (mut from_probe, mut from_build) = (Vec::new(), Vec::new());
    for column in args.output {
        match column {
            JoinColumn::Probe(i) => from_probe.push(*i),
            JoinColumn::Build(i) => from_build.push(*i),
            JoinColumn::BuildRow | JoinColumn::ProbeRow => {}
        }
    }
    check_gather(probe, &from_probe)?;
    // Without a build batch no build column is gathered (checked above): the probe
    // stands in where a side is named.
    let build = build.unwrap_or(probe);
    if from_build.iter().any(|c| *c >= build.columns().len()) {
        return Err(EngineError::InvalidArgument {
            what: "build column",
            detail: format!("beyond the build side's {}", build.columns().len()),
        });
    }
    wide_free(build, &from_build)?;
    let _finished = SyncOnExit(dev.stream);
    let taken = probe_rows(dev, table, probe, args.key, args.rows)?;
    let len = taken.as_ref().map_or(0, |t| t.len);
    // A row number is a UInt32 column of images without NULLs.
    let row_numbers = DeviceColumn {
        data_type: DataType::UInt32,
        values: ValueLayout::Images(Span { offset: 0, len: 0 }),
        validity: None,
    };
    let source = |column: &JoinColumn| match column {
        JoinColumn::Probe(i) => &probe.columns()[*i],
        JoinColumn::Build(i) => &build.columns()[*i],
        JoinColumn::BuildRow | JoinColumn::ProbeRow => &row_numbers,
    };
    let Some(taken) = taken else {
        let mut layout = Layout::new();
        let out = args
            .output
            .iter()
            .map(|c| layout.column_like(source(c), 0, 0))
            .collect();
        let memory = alloc_on_stream(dev, layout.size())?;
        return Ok(DeviceColumns::from_parts(
            args.schema,
            0,
            out,
            memory,
            batch_pool(dev),
        ));
    };
    let probe_extents = string_extents(dev, probe, &from_probe, &taken.probe, len)?;
    let build_list = match (&taken.build, from_build.is_empty()) {
        (_, true) => None,
        (Some(list), false) => Some(list),
        (None, false) => {
            return Err(EngineError::Internal(
                "a join gathering build columns without pairs".into(),
            ));
        }
    };
    let build_extents = match build_list {
        Some(list) => string_extents(dev, build, &from_build, list, len)?,
        None => Vec::new(),
    };
    // The output's layout in its column order; each side's columns in gather order.
    let mut layout = Layout::new();
    let (mut probe_out, mut build_out, mut rows_out) = (Vec::new(), Vec::new(), Vec::new());
    let (mut next_probe, mut next_build) = (0, 0);
    let mut out = Vec::with_capacity(args.output.len());
    for column in args.output {
        let laid = match column {
            JoinColumn::Probe(_) => {
                let c = layout.column_like(source(column), len, probe_extents[next_probe].bytes);
                next_probe += 1;
                probe_out.push(c.clone());
                c
            }
            JoinColumn::Build(_) => {
                let c = layout.column_like(source(column), len, build_extents[next_build].bytes);
                next_build += 1;
                build_out.push(c.clone());
                c
            }
            JoinColumn::BuildRow | JoinColumn::ProbeRow => {
                let c = layout.column_like(&row_numbers, len, 0);
                rows_out.push((*column, c.clone()));
                c
            }
        };
        out.push(laid);
    }
    let memory = alloc_on_stream(dev, layout.size())?;
    gather_columns(
        dev,
        probe,
        &from_probe,
        &taken.probe,
        len,
        &probe_extents,
        &probe_out,
        &memory,
    )?;
    if let Some(list) = build_list {
        gather_columns(
            dev,
            build,
            &from_build,
            list,
            len,
            &build_extents,
            &build_out,
            &memory,
        )?;
    }
    for (column, laid) in &rows_out {
        let list = match (column, &taken.build) {
            (JoinColumn::BuildRow, Some(list)) => list,
            (JoinColumn::BuildRow, None) => {
                return Err(EngineError::Internal(
                    "a join handing back build rows without pairs".into(),
                ));
            }
            _ => &taken.probe,
        };
        let ValueLayout::Images(span) = laid.values else {
            return Err(EngineError::Internal(
                "row numbers not laid out as images".into(),
            ));
        };
        row_images(dev, list, len, address(&memory, span.offset))?;
    }
    dev.sync()?;
    Ok(DeviceColumns::from_parts(
        args.schema,
        len,
        out,
        memory,
        batch_pool(dev),
    ))
}

/// Writes the first `len` rows of `list` as 8-byte images at device address `out`.
fn row_images(
    dev: &Dev<'_>,
    list: &CudaSlice<u32>,
    len: usize,
    out: u64,
) -> Result<(), EngineError> {
    let len_u64 = len as u64;
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_row_images")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch.arg(list).arg(&len_u64).arg(&out);
    // SAFETY: join_row_images(const u32*, u64, i64*): `list` holds at least `len` row
    // numbers and `out` addresses an output span of `len` 8-byte images in the batch
    // allocation (`Layout::column_like`); the kernel bounds its index by len.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(len)) }.map_err(dev.err("launch join_row_images"))?;
    Ok(())
}

/// A byte per probe row: whether its match count is non-zero (`matched`) or zero.
fn match_flags(
    dev: &Dev<'_>,
    counts: &CudaSlice<u32>,
    rows: usize,
    matched: bool,
) -> Result<CudaSlice<u8>, EngineError> {
    let mut flags = dev.zeros::<u8>(rows)?;
    let (rows_u64, matched) = (rows as u64, i32::from(matched));
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_match_flags")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(counts)
        .arg(&rows_u64)
        .arg(&matched)
        .arg(&mut flags);
    // SAFETY: join_match_flags(const u32*, u64, int, u8*): counts and flags hold `rows`
    // entries and the kernel bounds its index by rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_match_flags"))?;
    Ok(flags)
}

/// The matched pairs of a probe, on the device: each pair's build row and probe row.
pub(super) struct DevicePairs {
    pub(super) build: CudaSlice<u32>,
    pub(super) probe: CudaSlice<u32>,
    pub(super) len: usize,
}

/// Probes `table` with `rows` Int64 keys at device address `keys` (validity bitmap at
/// `valid`, 0 for none: NULL keys never match); `None` when no row matches. The match
/// counts are scanned into each row's first pair on the device
/// ([`scan_counts`]); only their total (8 bytes) comes to the host, which sizes the
/// pairs. The addresses must stay valid until this returns: it reads the total, which
/// waits for the kernels reading them.
pub(super) fn probe_pairs(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<Option<DevicePairs>, EngineError> {
    if rows == 0 {
        return Ok(None);
    }
    let counts = probe_counts(dev, table, keys, valid, rows)?;
    let (offsets, total) = scan_counts(dev, &counts, rows)?;
    if total == 0 {
        return Ok(None);
    }
    let rows_u64 = rows as u64;
    let len = usize::try_from(total).map_err(|_| unsupported("join output too large"))?;
    let (mut build, mut probe) = (dev.zeros::<u32>(len)?, dev.zeros::<u32>(len)?);
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_probe_write")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&keys)
        .arg(&valid)
        .arg(&rows_u64)
        .arg(&table.capacity)
        .arg(&table.slot_state)
        .arg(&table.slot_keys)
        .arg(&table.slot_rows)
        .arg(&offsets)
        .arg(&total)
        .arg(&mut build)
        .arg(&mut probe);
    // SAFETY: join_probe_write's arguments in order, keys and validity as for
    // join_probe_count; offsets holds `rows` entries, the outputs hold `total` pairs and
    // the kernel checks dst < out_capacity before each write.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_probe_write"))?;
    dev.sync()?;
    Ok(Some(DevicePairs { build, probe, len }))
}

/// Exclusive prefix sums of the first `rows` match `counts`, in 64 bits, on the device
/// (`join_scan_counts` per block, `join_scan_totals` over the block totals in one block,
/// `join_add_block_offsets`), and their total, read back (8 bytes).
fn scan_counts(
    dev: &Dev<'_>,
    counts: &CudaSlice<u32>,
    rows: usize,
) -> Result<(CudaSlice<u64>, u64), EngineError> {
    let blocks = rows.div_ceil(BLOCK as usize).max(1);
    let (rows_u64, blocks_u64) = (rows as u64, blocks as u64);
    let mut offsets = dev.zeros::<u64>(rows)?;
    let mut totals = dev.zeros::<u64>(blocks + 1)?;
    let per_block = dev.gpu.function(CudaKernel::HashJoin, "join_scan_counts")?;
    let mut launch = dev.stream.launch_builder(&per_block);
    launch
        .arg(counts)
        .arg(&rows_u64)
        .arg(&mut offsets)
        .arg(&mut totals);
    // SAFETY: join_scan_counts(const u32*, u64, u64*, u64*): counts and offsets hold
    // `rows` entries, totals `blocks` + 1; a grid of `blocks` blocks of BLOCK threads
    // (the kernel's JOIN_BLOCK), every row index bounded by rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_scan_counts"))?;
    let across = dev.gpu.function(CudaKernel::HashJoin, "join_scan_totals")?;
    let mut launch = dev.stream.launch_builder(&across);
    launch.arg(&mut totals).arg(&blocks_u64);
    // SAFETY: join_scan_totals(u64*, u64) runs as one block of BLOCK threads and touches
    // entries 0..=blocks of totals, which holds blocks + 1.
    #[allow(unsafe_code)]
    unsafe { launch.launch(one_block()) }.map_err(dev.err("launch join_scan_totals"))?;
    let add = dev
        .gpu
        .function(CudaKernel::HashJoin, "join_add_block_offsets")?;
    let mut launch = dev.stream.launch_builder(&add);
    launch.arg(&mut offsets).arg(&rows_u64).arg(&totals);
    // SAFETY: join_add_block_offsets(u64*, u64, const u64*): the grid of
    // join_scan_counts; offsets holds rows entries, totals one per block and more.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_add_block_offsets"))?;
    let total = dev
        .stream
        .clone_dtoh(&totals.slice(blocks..blocks + 1))
        .map_err(dev.err("cuMemcpyDtoH"))?;
    super::transfers::device_to_host(8);
    Ok((offsets, total.first().copied().unwrap_or(0)))
}

/// Each of `rows` probe keys' number of matches in `table` (keys and validity as for
/// [`probe_pairs`]), on the device; enqueued, not waited for.
pub(super) fn probe_counts(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    keys: u64,
    valid: u64,
    rows: usize,
) -> Result<CudaSlice<u32>, EngineError> {
    let rows_u64 = rows as u64;
    let mut counts = dev.zeros::<u32>(rows)?;
    let f = dev.gpu.function(CudaKernel::HashJoin, "join_probe_count")?;
    let mut launch = dev.stream.launch_builder(&f);
    launch
        .arg(&keys)
        .arg(&valid)
        .arg(&rows_u64)
        .arg(&table.capacity)
        .arg(&table.slot_state)
        .arg(&table.slot_keys)
        .arg(&mut counts);
    // SAFETY: join_probe_count(const i64*, const u8*, u64, u64, const u32*, const i64*,
    // u32*): `keys` addresses `rows` Int64 keys and `valid` a bitmap of ceil(rows/8)
    // bytes or 0 (the caller's contract), the table arrays hold `capacity` slots, counts
    // holds rows.
    #[allow(unsafe_code)]
    unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch join_probe_count"))?;
    Ok(counts)
}
