//! Gathering an operator's input into the batch size its device backend asks for
//! ([`oxidelake_device::BatchSizes`]) before the batches cross to the device.
//!
//! DataFusion's scans hand out 8,192-row batches; one device call per such batch would
//! pay a transfer and several launches for little work and would never fill the second
//! stream of the backend's pipeline. Batches are concatenated on the host (arrow's
//! `BatchCoalescer`) up to the target rows, fewer when the first batch's rows are so
//! wide that the target would pass the byte bound; the last batch holds what is left.
//! On the CPU backend nothing is gathered.
//!
//! An operator reading host batches gathers them ([`gather`], through
//! `crate::segment::host_items`) and runs its batch function through
//! `crate::segment::each_batch`: on a device on tokio's blocking pool, since a device
//! call blocks on its copies and kernels and would otherwise hold a runtime worker that
//! other tasks need; on the CPU batch by batch on the polling thread, as DataFusion's
//! own operators run.

use arrow::compute::BatchCoalescer;
use arrow::record_batch::RecordBatch;
use datafusion::error::DataFusionError;
use datafusion::execution::SendableRecordBatchStream;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use futures::StreamExt;

/// Where the gathering stands.
struct Gather {
    input: SendableRecordBatchStream,
    /// Created at the first batch, whose row width sets the target.
    coalescer: Option<BatchCoalescer>,
    target_rows: usize,
    target_bytes: usize,
    /// Batches of more rows than this pass without being copied (`None`: all are).
    pass_through: Option<usize>,
    /// The input ended (or failed): only completed batches are left to hand out.
    ended: bool,
}

/// Rows per gathered batch: `target_rows`, fewer when `sample`'s rows are wide enough
/// that so many would pass `target_bytes`.
fn rows_for(sample: &RecordBatch, target_rows: usize, target_bytes: usize) -> usize {
    let row_bytes = sample.get_array_memory_size() / sample.num_rows().max(1);
    (target_bytes / row_bytes.max(1)).clamp(1, target_rows.max(1))
}

/// `input` re-cut into batches of `target_rows` rows and at most about `target_bytes`
/// (the last may be smaller).
pub(crate) fn gather(
    input: SendableRecordBatchStream,
    target_rows: usize,
    target_bytes: usize,
) -> SendableRecordBatchStream {
    regather(input, target_rows, target_bytes, None)
}

/// `input` with its small batches merged up to `batch_size` rows; batches of at least
/// half that pass as they are, without a copy.
///
/// Why: an operator that drops most of its rows (a selective join or filter) hands on
/// one small batch per input batch, and each costs the operators above it per batch
/// what a full one does. TPC-H Q10's joins handed their partial aggregate 733 batches of
/// 156 rows on average; it took 105 ms where the stock plan's, fed 6 batches by the
/// stock join (which merges its output as this does), took 19 ms.
pub(crate) fn coalesce_small(
    input: SendableRecordBatchStream,
    batch_size: usize,
) -> SendableRecordBatchStream {
    let batch_size = batch_size.max(1);
    regather(input, batch_size, usize::MAX, Some(batch_size / 2))
}

fn regather(
    input: SendableRecordBatchStream,
    target_rows: usize,
    target_bytes: usize,
    pass_through: Option<usize>,
) -> SendableRecordBatchStream {
    let schema = input.schema();
    let state = Gather {
        input,
        coalescer: None,
        target_rows,
        target_bytes,
        pass_through,
        ended: false,
    };
    let stream = futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(batch) = state
                .coalescer
                .as_mut()
                .and_then(|c| c.next_completed_batch())
            {
                return Some((Ok(batch), state));
            }
            if state.ended {
                return None;
            }
            let step = match state.input.next().await {
                Some(Ok(batch)) => {
                    let coalescer = state.coalescer.get_or_insert_with(|| {
                        let rows = rows_for(&batch, state.target_rows, state.target_bytes);
                        BatchCoalescer::new(batch.schema(), rows)
                            .with_biggest_coalesce_batch_size(state.pass_through)
                    });
                    coalescer.push_batch(batch)
                }
                Some(Err(e)) => {
                    // The error ends the stream; what was gathered is not handed out.
                    state.ended = true;
                    state.coalescer = None;
                    return Some((Err(e), state));
                }
                None => {
                    state.ended = true;
                    match state.coalescer.as_mut() {
                        Some(c) => c.finish_buffered_batch(),
                        None => Ok(()),
                    }
                }
            };
            if let Err(e) = step {
                state.ended = true;
                return Some((Err(DataFusionError::from(e)), state));
            }
        }
    });
    Box::pin(RecordBatchStreamAdapter::new(schema, stream))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use arrow::array::{Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use datafusion::physical_plan::common::collect;

    fn batches(sizes: &[usize]) -> SendableRecordBatchStream {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let mut next = 0i64;
        let batches: Vec<_> = sizes
            .iter()
            .map(|n| {
                let values: Vec<i64> = (next..next + *n as i64).collect();
                next += *n as i64;
                Ok(RecordBatch::try_new(
                    Arc::clone(&schema),
                    vec![Arc::new(Int64Array::from(values))],
                )
                .unwrap())
            })
            .collect();
        Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(batches),
        ))
    }

    /// The values of `out`'s column, batch after batch.
    fn values(out: &[RecordBatch]) -> Vec<i64> {
        out.iter()
            .flat_map(|b| {
                b.column(0)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .values()
                    .to_vec()
            })
            .collect()
    }

    #[tokio::test]
    async fn small_batches_are_gathered_to_the_target_with_the_rest_last_and_order_kept() {
        let out = collect(gather(batches(&[300; 10]), 1000, usize::MAX))
            .await
            .unwrap();
        let sizes: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes, vec![1000, 1000, 1000]);
        let values = values(&out);
        assert_eq!(values, (0..3000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn small_batches_are_merged_and_full_ones_pass_as_they_are() {
        let out = collect(coalesce_small(
            batches(&[100, 150, 1000, 40, 30, 700]),
            1000,
        ))
        .await
        .unwrap();
        let sizes: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 2020, "{sizes:?}");
        assert!(sizes.len() <= 4, "small batches merged: {sizes:?}");
        assert!(sizes.contains(&1000), "the full batch passes: {sizes:?}");
        let values = values(&out);
        assert_eq!(values, (0..2020).collect::<Vec<_>>(), "order kept");
    }

    #[tokio::test]
    async fn wide_rows_are_gathered_to_the_byte_bound_before_the_row_target() {
        let input = batches(&[300; 10]);
        let row_bytes = 8; // one Int64 column, no NULLs
        let out = collect(gather(input, 1000, 200 * row_bytes + 64))
            .await
            .unwrap();
        let sizes: Vec<usize> = out.iter().map(RecordBatch::num_rows).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 3000, "{sizes:?}");
        let (last, full) = sizes.split_last().unwrap();
        assert!(
            full.iter().all(|n| (100..=210).contains(n)) && *last <= 210,
            "about 200 rows a batch (the rest last), not 1000: {sizes:?}"
        );
    }

    #[tokio::test]
    async fn an_input_error_is_passed_on_and_ends_the_stream() {
        let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
        let ok = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![Arc::new(Int64Array::from(vec![1, 2]))],
        )
        .unwrap();
        let items = vec![
            Ok(ok.clone()),
            Err(DataFusionError::Execution("disk gone".into())),
            Ok(ok),
        ];
        let input: SendableRecordBatchStream = Box::pin(RecordBatchStreamAdapter::new(
            schema,
            futures::stream::iter(items),
        ));
        let out: Vec<_> = gather(input, 1000, usize::MAX).collect().await;
        assert_eq!(out.len(), 1, "one error, then the end");
        assert!(
            out[0]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("disk gone")
        );
    }
}
