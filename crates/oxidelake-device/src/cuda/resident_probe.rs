//! The CUDA join probe of a device-resident batch (ADR-0014): the key images are probed
//! where they lie (`join_probe_count`, `join_probe_write`), and the probe columns the
//! join outputs are gathered at the matched pairs' probe rows on the device
//! (`resident_gather`), so one copy brings back only the joined rows' probe side, and a
//! second each pair's build row (the build side lives on the host). The match counts
//! cross for the scan that places the pairs, as in the host-interface probe.

use arrow::array::UInt32Array;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;

use super::launch::{CudaJoinTable, Dev, probe_pairs, unsupported};
use super::resident_gather::{gather_columns, string_extents};
use super::resident_memory::{SyncOnExit, address, alloc_on_stream};
use crate::DeviceStream;
use crate::ops::{ProbeResidentArgs, ResidentMatches};
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
    let Some(pairs) = probe_pairs(dev, table, address(memory, key.offset), valid, rows)? else {
        return Ok(ResidentMatches {
            build_indices: UInt32Array::from(Vec::<u32>::new()),
            probe_rows: RecordBatch::new_empty(schema),
        });
    };
    let extents = string_extents(dev, batch, args.gather, &pairs.probe, pairs.len)?;
    let mut layout = Layout::new();
    let out: Vec<ResidentColumn> = args
        .gather
        .iter()
        .zip(&extents)
        .map(|(c, extent)| layout.column_like(&columns[*c], pairs.len, extent.bytes))
        .collect();
    let gathered = alloc_on_stream(dev, layout.size())?;
    gather_columns(
        dev,
        batch,
        args.gather,
        &pairs.probe,
        pairs.len,
        &extents,
        &out,
        &gathered,
    )?;
    dev.sync()?;
    let on_device = DeviceBatch::from_parts(schema, pairs.len, out, gathered);
    let probe_rows = crate::resident::download(dev.backend, device_stream, &on_device)?;
    let build_indices = UInt32Array::from(dev.download(&pairs.build)?);
    Ok(ResidentMatches {
        build_indices,
        probe_rows,
    })
}
