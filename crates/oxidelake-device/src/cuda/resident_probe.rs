//! The CUDA join probe of a device-resident batch (ADR-0014): the key images are probed
//! where they lie (`join_probe_count`, `join_probe_write`), and the probe columns the
//! join outputs are gathered at the matched pairs' probe rows on the device
//! (`resident_gather`), so one copy brings back only the joined rows' probe side, and a
//! second each pair's build row (the build side lives on the host). The match counts
//! cross for the scan that places the pairs, as in the host-interface probe.
//!
//! A semi or anti join needs no pairs: `join_match_flags` marks the probe rows with (or
//! without) a match from their counts, `resident_gather::list_flagged` lists them (their
//! number is the one readback besides string byte totals), and the gather brings back
//! those rows.

use arrow::array::UInt32Array;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::launch::{CudaJoinTable, Dev, grid, probe_counts, probe_pairs, unsupported};
use super::resident_gather::{gather_columns, list_flagged, string_extents};
use super::resident_memory::{SyncOnExit, address, alloc_on_stream};
use crate::DeviceStream;
use crate::kernels::CudaKernel;
use crate::ops::{ProbeResidentArgs, ProbeRows, ResidentMatches};
use crate::resident::{DeviceBatch, Layout, ResidentColumn, ResidentValues};

/// See the module docs.
pub(super) fn probe_resident(
    dev: &Dev<'_>,
    device_stream: &DeviceStream,
    table: &CudaJoinTable,
    args: ProbeResidentArgs<'_>,
) -> Result<ResidentMatches, EngineError> {
    let batch = args.batch;
    let columns = batch.columns();
    let beyond = std::iter::once(&args.key)
        .chain(args.gather)
        .find(|c| **c >= columns.len());
    if let Some(c) = beyond {
        return Err(EngineError::InvalidArgument {
            what: "probe column",
            detail: format!("column {c} of {}", columns.len()),
        });
    }
    let ResidentValues::Images(key) = columns[args.key].values else {
        return Err(unsupported(
            "a device join probe whose key is not held as 8-byte images",
        ));
    };
    if args
        .gather
        .iter()
        .any(|c| matches!(columns[*c].values, ResidentValues::Wide(_)))
    {
        return Err(unsupported(
            "a device join probe gathering a decimal column whose batch needs more than 64 bits",
        ));
    }
    let rows = batch.num_rows();
    u32::try_from(rows).map_err(|_| unsupported("a batch of 2^32 rows or more"))?;
    let schema = std::sync::Arc::new(batch.schema().project(args.gather)?);
    let _finished = SyncOnExit(dev.stream);
    let memory = batch.memory();
    let valid = columns[args.key]
        .validity
        .map_or(0, |span| address(memory, span.offset));
    let keys = address(memory, key.offset);
    let empty = || ResidentMatches {
        build_indices: UInt32Array::from(Vec::<u32>::new()),
        probe_rows: RecordBatch::new_empty(std::sync::Arc::clone(&schema)),
    };
    // The probe rows to bring back (one per pair, or the matched / unmatched rows), and
    // for pairs each one's build row.
    let (row_list, len, build) = match args.rows {
        ProbeRows::Pairs => match probe_pairs(dev, table, keys, valid, rows)? {
            Some(pairs) => (pairs.probe, pairs.len, Some(pairs.build)),
            None => return Ok(empty()),
        },
        ProbeRows::Matched | ProbeRows::Unmatched => {
            if rows == 0 {
                return Ok(empty());
            }
            let counts = probe_counts(dev, table, keys, valid, rows)?;
            let flags = match_flags(dev, &counts, rows, args.rows == ProbeRows::Matched)?;
            let (list, len) = list_flagged(dev, &flags, rows)?;
            if len == 0 {
                return Ok(empty());
            }
            (list, len, None)
        }
    };
    let extents = string_extents(dev, batch, args.gather, &row_list, len)?;
    let mut layout = Layout::new();
    let out: Vec<ResidentColumn> = args
        .gather
        .iter()
        .zip(&extents)
        .map(|(c, extent)| layout.column_like(&columns[*c], len, extent.bytes))
        .collect();
    let gathered = alloc_on_stream(dev, layout.size())?;
    gather_columns(
        dev,
        batch,
        args.gather,
        &row_list,
        len,
        &extents,
        &out,
        &gathered,
    )?;
    dev.sync()?;
    let on_device = DeviceBatch::from_parts(schema, len, out, gathered);
    let probe_rows = crate::resident::download(dev.backend, device_stream, &on_device)?;
    let build_indices = match build {
        Some(build) => UInt32Array::from(dev.download(&build)?),
        None => UInt32Array::from(Vec::<u32>::new()),
    };
    Ok(ResidentMatches {
        build_indices,
        probe_rows,
    })
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
    let f = dev
        .backend
        .function(CudaKernel::HashJoin, "join_match_flags")?;
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
