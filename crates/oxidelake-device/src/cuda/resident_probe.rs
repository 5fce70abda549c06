//! The CUDA join probe of a device-resident batch (ADR-0014): the key images are probed
//! where they lie (`join_probe_count`, `join_probe_write`), and the probe columns the
//! join outputs are gathered at the matched pairs' probe rows on the device
//! (`resident_gather`), so one copy brings back only the joined rows' probe side, and a
//! second each pair's build row (the build side lives on the host). The match counts
//! are scanned on the device (`launch::probe_pairs`): only their total comes back.
//!
//! [`join_resident`] (stage 3) joins with a build side that lives on the device too: the
//! output's build columns are gathered at the pairs' build rows there, and the joined
//! batch stays on the device.
//!
//! A semi or anti join needs no pairs: `join_match_flags` marks the probe rows with (or
//! without) a match from their counts, `resident_gather::list_flagged` lists them (their
//! number is the one readback besides string byte totals), and the gather brings back
//! those rows.

use arrow::array::UInt32Array;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use cudarc::driver::{CudaSlice, PushKernelArg};

use super::gpu::{Dev, grid, unsupported};
use super::launch::{CudaJoinTable, probe_counts, probe_pairs};
use super::resident_build::key_images;
use super::resident_gather::{gather_columns, list_flagged, string_extents};
use super::resident_memory::{SyncOnExit, alloc_on_stream, batch_pool};
use crate::DeviceStream;
use crate::kernels::CudaKernel;
use crate::ops::{
    JoinColumn, JoinResidentArgs, ProbeResidentArgs, ProbeRows, ResidentKey, ResidentMatches,
};
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
    check_gather(batch, args.gather)?;
    let schema = std::sync::Arc::new(batch.schema().project(args.gather)?);
    let _finished = SyncOnExit(dev.stream);
    let empty = || ResidentMatches {
        build_indices: UInt32Array::from(Vec::<u32>::new()),
        probe_rows: RecordBatch::new_empty(std::sync::Arc::clone(&schema)),
    };
    let Some(ProbedRows {
        probe: row_list,
        len,
        build,
    }) = probe_rows(dev, table, batch, ResidentKey::Column(args.key), args.rows)?
    else {
        return Ok(empty());
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
    let on_device = DeviceBatch::from_parts(schema, len, out, gathered, batch_pool(dev));
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
    batch: &DeviceBatch,
    key: ResidentKey<'_>,
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
fn check_gather(batch: &DeviceBatch, gather: &[usize]) -> Result<(), EngineError> {
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
fn wide_free(batch: &DeviceBatch, gather: &[usize]) -> Result<(), EngineError> {
    let columns = batch.columns();
    if gather.iter().any(|c| {
        matches!(
            columns.get(*c).map(|c| c.values),
            Some(ResidentValues::Wide(_)) | None
        )
    }) {
        return Err(unsupported(
            "a device join gathering a decimal column whose batch needs more than 64 bits",
        ));
    }
    Ok(())
}

/// A join of a device batch with a build side on the device, whose output stays there
/// (ADR-0014, stage 3): the probe as above, then each output column gathered from its
/// side at the pairs' build or probe rows.
pub(super) fn join_resident(
    dev: &Dev<'_>,
    table: &CudaJoinTable,
    args: JoinResidentArgs<'_>,
) -> Result<DeviceBatch, EngineError> {
    let (probe, build) = (args.probe, args.build);
    let (mut from_probe, mut from_build) = (Vec::new(), Vec::new());
    for column in args.output {
        match column {
            JoinColumn::Probe(i) => from_probe.push(*i),
            JoinColumn::Build(i) if args.rows == ProbeRows::Pairs => from_build.push(*i),
            JoinColumn::Build(_) => {
                return Err(EngineError::InvalidArgument {
                    what: "join output",
                    detail: "a semi or anti join outputs probe columns only".into(),
                });
            }
        }
    }
    if args.schema.fields().len() != args.output.len() {
        return Err(EngineError::InvalidArgument {
            what: "join output",
            detail: format!(
                "{} columns for a schema of {}",
                args.output.len(),
                args.schema.fields().len()
            ),
        });
    }
    check_gather(probe, &from_probe)?;
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
    let source = |column: &JoinColumn| match column {
        JoinColumn::Probe(i) => &probe.columns()[*i],
        JoinColumn::Build(i) => &build.columns()[*i],
    };
    let Some(taken) = taken else {
        let mut layout = Layout::new();
        let out = args
            .output
            .iter()
            .map(|c| layout.column_like(source(c), 0, 0))
            .collect();
        let memory = alloc_on_stream(dev, layout.size())?;
        return Ok(DeviceBatch::from_parts(
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
    let (mut probe_out, mut build_out) = (Vec::new(), Vec::new());
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
    dev.sync()?;
    Ok(DeviceBatch::from_parts(
        args.schema,
        len,
        out,
        memory,
        batch_pool(dev),
    ))
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
