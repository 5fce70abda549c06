//! One side of a join written to [`FAN_OUT`] Arrow IPC spill files by a hash of its join
//! keys.

use std::io::BufWriter;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, UInt32Array};
use arrow::compute::take_record_batch;
use arrow::datatypes::{DataType, SchemaRef};
use arrow::ipc::writer::StreamWriter;
use arrow::record_batch::RecordBatch;
use datafusion::common::hash_utils::{RandomState, create_hashes};
use datafusion::error::{DataFusionError, Result};
use datafusion::execution::{SpillFile, SpillWriter, TaskContext};
use datafusion::physical_expr::PhysicalExprRef;
use datafusion::physical_plan::joins::HashJoinExec;
use datafusion::physical_plan::metrics::{Count, SpillMetrics};

use super::FAN_OUT;
use super::null_keys::{NullKeyRows, key_columns, rows_with_keys};
use super::side::Side;

/// An open spill file of one part.
struct PartFile {
    file: Arc<dyn SpillFile>,
    writer: StreamWriter<BufWriter<Box<dyn SpillWriter>>>,
}

/// Routes the rows of one side to [`FAN_OUT`] parts by a seeded hash of their join keys;
/// rows whose key holds a NULL are dropped or dealt in turn (`null_keys`).
pub(super) struct PartRouter {
    keys: Vec<PhysicalExprRef>,
    hasher: RandomState,
    /// The part of each row of the batch being routed ([`DROPPED`] for a dropped row).
    parts: Vec<usize>,
    hashes: Vec<u64>,
    null_keys: NullKeyRows,
    /// NULL-key rows dealt so far ([`NullKeyRows::Spread`]), which gives each its part in
    /// turn.
    dealt: usize,
    /// NULL-key rows dropped ([`NullKeyRows::Dropped`]), the operator's
    /// `null_key_rows_dropped`.
    dropped: Count,
}

/// The part of a row that goes to none.
const DROPPED: usize = usize::MAX;

impl PartRouter {
    /// The router of `side` of `join`, with that side's schema; the NULL-key rows it
    /// drops count in `dropped`.
    pub(super) fn new(
        side: Side,
        seed: u64,
        join: &HashJoinExec,
        dropped: &Count,
    ) -> (SchemaRef, Self) {
        let (schema, keys) = match side {
            Side::Left => (
                join.left().schema(),
                join.on().iter().map(|(l, _)| Arc::clone(l)).collect(),
            ),
            Side::Right => (
                join.right().schema(),
                join.on().iter().map(|(_, r)| Arc::clone(r)).collect(),
            ),
        };
        let router = Self {
            keys,
            hasher: RandomState::with_seed(seed),
            parts: Vec::new(),
            hashes: Vec::new(),
            null_keys: NullKeyRows::of(join, side),
            dealt: 0,
            dropped: dropped.clone(),
        };
        (schema, router)
    }

    /// The rows of `batch` ordered by part (a counting sort), and where each part starts
    /// in that order: part `p`'s rows are `order[starts[p]..starts[p + 1]]`. Dropped rows
    /// are in no part: `order` then holds fewer rows than `batch`.
    pub(super) fn route(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<(Vec<u32>, [usize; FAN_OUT + 1])> {
        let keys: Vec<ArrayRef> = key_columns(&self.keys, batch)?;
        self.hashes.clear();
        self.hashes.resize(batch.num_rows(), 0);
        create_hashes(&keys, &self.hasher, &mut self.hashes)?;

        let part_of = |h: u64| (h >> 32) as usize % FAN_OUT;
        self.parts.clear();
        self.parts.extend(self.hashes.iter().map(|h| part_of(*h)));
        // A NULL key hashes alike under every seed: such rows are dropped or dealt out
        // instead (`null_keys`), except where NULL equals NULL.
        let null_rows = match self.null_keys {
            NullKeyRows::Hashed => None,
            NullKeyRows::Dropped | NullKeyRows::Spread => rows_with_keys(&keys),
        };
        if let Some(valid) = null_rows {
            for row in (0..batch.num_rows()).filter(|row| valid.is_null(*row)) {
                self.parts[row] = match self.null_keys {
                    NullKeyRows::Spread => {
                        self.dealt = self.dealt.wrapping_add(1);
                        self.dealt % FAN_OUT
                    }
                    NullKeyRows::Dropped | NullKeyRows::Hashed => DROPPED,
                };
            }
            if self.null_keys == NullKeyRows::Dropped {
                self.dropped.add(valid.null_count());
            }
        }

        let mut starts = [0usize; FAN_OUT + 1];
        for p in self.parts.iter().filter(|p| **p != DROPPED) {
            starts[*p + 1] += 1;
        }
        for p in 0..FAN_OUT {
            starts[p + 1] += starts[p];
        }
        let mut next = starts;
        let mut order = vec![0u32; starts[FAN_OUT]];
        for (row, p) in self.parts.iter().enumerate() {
            if *p == DROPPED {
                continue;
            }
            order[next[*p]] = u32::try_from(row).map_err(|_| {
                DataFusionError::Internal("a batch of more than 2^32 rows".to_string())
            })?;
            next[*p] += 1;
        }
        Ok((order, starts))
    }
}

/// The [`FAN_OUT`] spill files of one side, opened as rows arrive for them.
pub(super) struct SpillSet {
    context: Arc<TaskContext>,
    side: Side,
    schema: SchemaRef,
    router: PartRouter,
    metrics: SpillMetrics,
    parts: Vec<Option<PartFile>>,
}

impl SpillSet {
    /// The files of `side` of `join` at hash seed `seed`; the NULL-key rows its router
    /// drops count in `null_keys_dropped`.
    pub(super) fn new(
        context: &Arc<TaskContext>,
        side: Side,
        seed: u64,
        join: &HashJoinExec,
        metrics: &SpillMetrics,
        null_keys_dropped: &Count,
    ) -> Result<Self> {
        let (schema, router) = PartRouter::new(side, seed, join, null_keys_dropped);
        Ok(Self {
            context: Arc::clone(context),
            side,
            schema,
            router,
            metrics: metrics.clone(),
            parts: (0..FAN_OUT).map(|_| None).collect(),
        })
    }

    /// Writes each row of `batch` to the file of its part (a NULL-key row the join never
    /// emits to none).
    pub(super) fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        // One `take` in part order serves every part as a slice.
        let (order, starts) = self.router.route(batch)?;
        let sorted = take_record_batch(batch, &UInt32Array::from(order))?;
        for p in 0..FAN_OUT {
            let (start, end) = (starts[p], starts[p + 1]);
            if start < end {
                let slice = compact_views(&sorted.slice(start, end - start))?;
                self.part(p)?.writer.write(&slice)?;
                self.metrics.spilled_rows.add(slice.num_rows());
            }
        }
        Ok(())
    }

    fn part(&mut self, p: usize) -> Result<&mut PartFile> {
        let slot = &mut self.parts[p];
        if slot.is_none() {
            let what = match self.side {
                Side::Left => "GraceHashJoinExec build part",
                Side::Right => "GraceHashJoinExec probe part",
            };
            let file = self
                .context
                .runtime_env()
                .disk_manager
                .create_tmp_file(what)?;
            let writer = StreamWriter::try_new(BufWriter::new(file.open_writer()?), &self.schema)?;
            self.metrics.spill_file_count.add(1);
            *slot = Some(PartFile { file, writer });
        }
        slot.as_mut()
            .ok_or_else(|| DataFusionError::Internal("spill part not opened".to_string()))
    }

    /// Closes every file; `None` for a part no row went to.
    pub(super) fn finish(self) -> Result<Vec<Option<Arc<dyn SpillFile>>>> {
        let metrics = self.metrics;
        self.parts
            .into_iter()
            .map(|part| {
                let Some(PartFile { file, mut writer }) = part else {
                    return Ok(None);
                };
                writer.finish()?;
                let mut inner = writer
                    .into_inner()?
                    .into_inner()
                    .map_err(|e| DataFusionError::IoError(e.into_error()))?;
                inner.finish()?;
                metrics
                    .spilled_bytes
                    .add(usize::try_from(file.size().unwrap_or(0)).unwrap_or(usize::MAX));
                Ok(Some(file))
            })
            .collect()
    }
}

/// `batch` with its string and binary view columns copied to buffers of their own: a
/// slice of a view array still points into every buffer of the whole array, which the
/// IPC writer would write out once per slice.
pub(super) fn compact_views(batch: &RecordBatch) -> Result<RecordBatch> {
    let columns = batch
        .columns()
        .iter()
        .map(|c| match c.data_type() {
            DataType::Utf8View => Arc::new(c.as_string_view().gc()) as ArrayRef,
            DataType::BinaryView => Arc::new(c.as_binary_view().gc()) as ArrayRef,
            _ => Arc::clone(c),
        })
        .collect();
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sliced_view_column_is_written_with_only_its_own_strings() {
        let strings: Vec<String> = (0..1000)
            .map(|i| format!("a string long enough {i:04}"))
            .collect();
        let array: ArrayRef = Arc::new(arrow::array::StringViewArray::from_iter_values(&strings));
        let batch = RecordBatch::try_from_iter([("s", array)]).unwrap();
        let slice = batch.slice(10, 5);
        let compact = compact_views(&slice).unwrap();
        assert_eq!(compact.column(0).as_string_view().value(0), strings[10]);
        assert!(compact.get_array_memory_size() * 20 < slice.get_array_memory_size());
    }
}
