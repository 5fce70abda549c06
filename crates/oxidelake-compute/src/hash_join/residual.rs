//! The join filter: the non-equi part of a join condition (`l2.l_suppkey <> l1.l_suppkey`,
//! `l_quantity < 0.2 * avg_quantity`), applied to the key-matched pairs before they
//! become output rows, as DataFusion's hash join applies it.
//!
//! It runs on the host with DataFusion's own expression evaluation, after the device
//! found the pairs: for every pair, the columns the filter reads are gathered from the
//! build and probe rows into the filter's intermediate batch, the expression is
//! evaluated, and only the pairs where it is true go on. For a semi or anti join that
//! decides which probe rows have a match at all, so the filter cannot be a separate
//! operator above the join. EXPLAIN shows it on the join node (`filter=…`).

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, BooleanArray, RecordBatchOptions, UInt32Array};
use arrow::compute::{filter, prep_null_mask_filter, take};
use arrow::record_batch::RecordBatch;
use datafusion::common::JoinSide;
use datafusion::error::{DataFusionError, Result};
use datafusion::physical_plan::joins::utils::JoinFilter;

/// The pairs `(build_indices[i], probe_indices[i])` for which `join_filter` is true.
pub(crate) fn filter_pairs(
    join_filter: &JoinFilter,
    build: &RecordBatch,
    probe: &RecordBatch,
    build_indices: &UInt32Array,
    probe_indices: &UInt32Array,
) -> Result<(UInt32Array, UInt32Array)> {
    let pairs = build_indices.len();
    let mut columns: Vec<ArrayRef> = Vec::with_capacity(join_filter.column_indices().len());
    for column in join_filter.column_indices() {
        let (batch, indices) = match column.side {
            JoinSide::Left => (build, build_indices),
            JoinSide::Right => (probe, probe_indices),
            JoinSide::None => {
                return Err(DataFusionError::Internal(
                    "join filter column of neither side".into(),
                ));
            }
        };
        columns.push(take(batch.column(column.index).as_ref(), indices, None)?);
    }
    let intermediate = RecordBatch::try_new_with_options(
        Arc::clone(join_filter.schema()),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(pairs)),
    )?;
    let verdict = join_filter
        .expression()
        .evaluate(&intermediate)?
        .into_array(pairs)?;
    let verdict = verdict
        .as_any()
        .downcast_ref::<BooleanArray>()
        .ok_or_else(|| DataFusionError::Internal("join filter is not boolean".into()))?;
    // NULL is not true: the pair does not match.
    let keep = if verdict.null_count() > 0 {
        prep_null_mask_filter(verdict)
    } else {
        verdict.clone()
    };
    let kept = |indices: &UInt32Array| -> Result<UInt32Array> {
        let out = filter(indices, &keep)?;
        out.as_any()
            .downcast_ref::<UInt32Array>()
            .cloned()
            .ok_or_else(|| DataFusionError::Internal("filtered indices changed type".into()))
    };
    Ok((kept(build_indices)?, kept(probe_indices)?))
}
