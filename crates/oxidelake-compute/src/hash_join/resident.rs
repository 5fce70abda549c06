//! `GpuHashJoinExec` probing with device-resident batches (ADR-0014, stage 2).
//!
//! Where the probe input hands on device batches (a GPU filter or projection between
//! transitions), an inner, right semi or right anti join without a join filter on one
//! integer-like key probes the key images where they lie, and only the joined rows come
//! back to the host: for an inner join each pair's build row (the build side lives on
//! the host) and the probe columns the join outputs, gathered on the device; for a semi
//! or anti join the probe rows with (without) a match. The join is then the way back to the host for its
//! probe side. Any other batch is *bridged*: downloaded and probed by the host path
//! (`bridged_batches`; every batch on the CPU backend, which keeps the host path the
//! reference). A device error on a resident batch fails the query: there is no host copy
//! to fall back to.

use std::sync::Arc;
use std::time::Instant;

use arrow::array::ArrayRef;
use arrow::compute::take;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use datafusion::common::JoinType;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::metrics::Count;
use oxidelake_core::EngineError;
use oxidelake_device::ops::{ProbeResidentArgs, ProbeRows};
use oxidelake_device::resident::{self, DeviceBatch};

use super::keys::JoinKeys;
use super::{BuildSide, ProbeSpec, probe_batch};
use crate::exec_support::{ExecBackend, OperatorMetrics};

/// Joins one device batch (see the module docs).
pub(super) fn probe_device_batch(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    bridged: &Count,
    side: &BuildSide,
    batch: &DeviceBatch,
    join: &ProbeSpec,
    schema: &SchemaRef,
) -> Result<RecordBatch> {
    if let Some(out) = probe_on_device(exec, metrics, side, batch, join, schema)? {
        return Ok(out);
    }
    let host = resident::download(exec.backend.as_ref(), &exec.stream, batch)?;
    bridged.add(1);
    probe_batch(exec, metrics, side, &host, join, schema)
}

/// The join of `batch` on the device, or `None` where this join or backend cannot.
fn probe_on_device(
    exec: &ExecBackend,
    metrics: &OperatorMetrics,
    side: &BuildSide,
    batch: &DeviceBatch,
    join: &ProbeSpec,
    schema: &SchemaRef,
) -> Result<Option<RecordBatch>> {
    let JoinKeys::Widened(key) = join.keys else {
        return Ok(None);
    };
    let rows = match join.join_type {
        JoinType::Inner => ProbeRows::Pairs,
        JoinType::RightSemi => ProbeRows::Matched,
        JoinType::RightAnti => ProbeRows::Unmatched,
        _ => return Ok(None),
    };
    if join.filter.is_some() || side.table.device() != exec.backend.device() {
        return Ok(None);
    }
    let started = Instant::now();
    // Semi and anti joins output probe columns only: their indices count from 0.
    let build_width = match rows {
        ProbeRows::Pairs => side.batch.num_columns(),
        _ => 0,
    };
    let wanted: Vec<usize> = match &join.projection {
        Some(projection) => projection.clone(),
        None => (0..build_width + batch.columns().len()).collect(),
    };
    // The probe columns the output takes; the key alone when it takes none (a gather
    // needs a column to size the rows).
    let mut gather: Vec<usize> = wanted
        .iter()
        .filter(|i| **i >= build_width)
        .map(|i| i - build_width)
        .collect();
    if gather.is_empty() {
        gather.push(key);
    }
    let args = ProbeResidentArgs {
        batch,
        key,
        gather: &gather,
        rows,
    };
    let matches = match exec
        .backend
        .probe_join_table_resident(&exec.stream, &side.table, args)
    {
        Ok(matches) => matches,
        Err(EngineError::Unsupported { .. }) => return Ok(None),
        Err(err) => return Err(DataFusionError::from(err)),
    };
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(wanted.len());
    for i in &wanted {
        columns.push(if *i < build_width {
            take(side.batch.column(*i).as_ref(), &matches.build_indices, None)?
        } else {
            let at = gather
                .iter()
                .position(|g| *g == i - build_width)
                .ok_or_else(|| {
                    DataFusionError::Internal(format!("probe column {i} was not gathered"))
                })?;
            Arc::clone(matches.probe_rows.column(at))
        });
    }
    let out = RecordBatch::try_new(Arc::clone(schema), columns)?;
    // What crossed: the pairs' build rows (none for semi and anti joins) and the
    // gathered probe columns.
    let moved = exec.bytes_moved(|| {
        matches.build_indices.len() * 4 + matches.probe_rows.get_array_memory_size()
    });
    metrics.record(batch.num_rows(), out.num_rows(), started, moved);
    Ok(Some(out))
}
