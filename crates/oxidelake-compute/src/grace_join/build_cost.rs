//! What a pair's build side will cost each join in bytes, so that the grace join splits a
//! pair again only when its join would not fit: the stock join's reservation, and the GPU
//! join's (its collected batches, the copy it concatenates and its key table).

use arrow::array::{Array, AsArray, MAX_INLINE_VIEW_LEN};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use datafusion::common::utils::memory::RecordBatchMemoryCounter;

/// Bytes a row costs the stock join beyond its columns: its hash table entry (at most
/// about 40 bytes for DataFusion's `(u32, u64)` buckets at the worst load), its link in
/// the chain of equal hashes, and its bit in the visited-rows bitmap of outer joins,
/// rounded up.
const ROW_OVERHEAD: usize = 64;

/// Bytes a row costs the GPU join beyond its columns: its key as an 8-byte image, its
/// link in the chain of equal keys (4), and its share of the index (at most 64: a
/// direct index of up to 16 four-byte heads a row, or hashed slots of 16 bytes at a load
/// of a quarter to a half), rounded up.
const DEVICE_ROW_OVERHEAD: usize = 80;

/// What the GPU join will hold for `batch` when it collects it after the batches
/// `counter` has seen: the collected batch (its buffers not counted yet, counted as the
/// stock join counts them, each allocation once), the copy its concatenation makes
/// ([`compact_bytes`]), and its key column and table ([`DEVICE_ROW_OVERHEAD`] a row).
///
/// Issue 44, item 8: this used to be twice `batch.get_array_memory_size()`, which counts
/// each buffer's whole allocation. A batch read back from a spill file points into the
/// chunk of up to 128 KiB the reader decoded, shared by every buffer of that batch and by
/// its neighbours, so a pair's build side of a few hundred KiB counted as tens of MiB: no
/// spilled pair ever fitted, each was split again down to the last level (up to 32³
/// pairs a partition, every row rewritten at each level in ever smaller IPC messages),
/// and the last level was joined past the free bytes of the pool.
pub(super) fn device_build_cost(
    counter: &mut RecordBatchMemoryCounter,
    batch: &RecordBatch,
) -> usize {
    counter
        .count_batch(batch)
        .saturating_add(compact_bytes(batch))
        .saturating_add(batch.num_rows().saturating_mul(DEVICE_ROW_OVERHEAD))
}

/// The bytes `batch`'s rows take once copied into buffers of their own, as the GPU join
/// concatenates them: each column's slice of its buffers and, for view columns, the
/// bytes of the values too long to be inlined in their views (a view column's data
/// buffers are often shared with other batches, so their size would count the same
/// bytes many times).
fn compact_bytes(batch: &RecordBatch) -> usize {
    batch
        .columns()
        .iter()
        .map(|column| {
            let data = column.to_data();
            let sliced = data
                .get_slice_memory_size()
                .unwrap_or_else(|_| data.get_array_memory_size());
            let long_values = match column.data_type() {
                DataType::Utf8View => long_view_bytes(column.as_string_view().views()),
                DataType::BinaryView => long_view_bytes(column.as_binary_view().views()),
                _ => 0,
            };
            sliced.saturating_add(long_values)
        })
        .fold(0, usize::saturating_add)
}

/// The bytes of the values of `views` (byte views) that live in data buffers.
fn long_view_bytes(views: &[u128]) -> usize {
    views
        .iter()
        .map(|view| *view as u32)
        .filter(|len| *len > MAX_INLINE_VIEW_LEN)
        .map(|len| len as usize)
        .sum()
}

/// What the stock join will reserve for `batch` when it collects it after the batches
/// `counter` has seen: the buffers not counted yet, counted the way the stock join counts
/// them (each allocation once, at its capacity; a batch read back from a spill file
/// points into the chunk the reader decoded), plus [`ROW_OVERHEAD`] a row.
pub(super) fn build_cost(counter: &mut RecordBatchMemoryCounter, batch: &RecordBatch) -> usize {
    counter
        .count_batch(batch)
        .saturating_add(batch.num_rows().saturating_mul(ROW_OVERHEAD))
}

#[cfg(test)]
mod tests {
    use arrow::array::{ArrayRef, Int64Array, StringArray};
    use arrow::buffer::Buffer;
    use arrow::ipc::reader::StreamDecoder;
    use arrow::ipc::writer::StreamWriter;

    use std::sync::Arc;

    use super::*;

    /// `batches` written as one Arrow IPC stream and decoded from one buffer, as
    /// DataFusion's spill reader decodes a chunk of a spill file (every array then points
    /// into that buffer), with the stream's length.
    fn decoded_from_one_chunk(batches: &[RecordBatch]) -> (Vec<RecordBatch>, usize) {
        let mut writer = StreamWriter::try_new(Vec::new(), &batches[0].schema()).unwrap();
        for batch in batches {
            writer.write(batch).unwrap();
        }
        writer.finish().unwrap();
        let bytes = writer.into_inner().unwrap();
        let mut chunk = Buffer::from_slice_ref(&bytes);
        let mut decoder = StreamDecoder::new();
        let mut decoded = Vec::new();
        while let Some(batch) = decoder.decode(&mut chunk).unwrap() {
            decoded.push(batch);
        }
        (decoded, bytes.len())
    }

    #[test]
    fn a_device_pair_counts_the_spill_chunk_its_build_batches_share_once() {
        let batches: Vec<RecordBatch> = (0..40_i64)
            .map(|b| {
                let rows = b * 256..(b + 1) * 256;
                let keys: ArrayRef = Arc::new(Int64Array::from_iter_values(rows.clone()));
                let names: ArrayRef = Arc::new(StringArray::from_iter_values(
                    rows.map(|i| format!("row {i}")),
                ));
                RecordBatch::try_from_iter([("k", keys), ("s", names)]).unwrap()
            })
            .collect();
        let (decoded, chunk_bytes) = decoded_from_one_chunk(&batches);
        assert_eq!(decoded.len(), batches.len());

        let mut counter = RecordBatchMemoryCounter::new();
        let cost: usize = decoded
            .iter()
            .map(|batch| device_build_cost(&mut counter, batch))
            .sum();
        let rows: usize = decoded.iter().map(RecordBatch::num_rows).sum();
        let copies: usize = decoded.iter().map(compact_bytes).sum();
        let chunk_counted = cost - copies - rows * DEVICE_ROW_OVERHEAD;
        // The chunk once (at its allocation's size, rounded up to 64 bytes) ...
        assert!(
            (chunk_bytes..chunk_bytes + 64).contains(&chunk_counted),
            "{chunk_counted} bytes counted for a {chunk_bytes}-byte chunk"
        );
        // ... and the concatenated copy at about the rows' own size.
        let own: usize = batches
            .iter()
            .map(|b| b.get_array_memory_size())
            .sum::<usize>();
        assert!(copies <= own, "{copies} bytes for a copy of {own}");
        // Each buffer's whole allocation, as before, counted the chunk 80 times and more.
        let per_buffer: usize = decoded.iter().map(|b| b.get_array_memory_size()).sum();
        assert!(per_buffer > 80 * chunk_bytes, "{per_buffer}");
    }

    #[test]
    fn long_view_values_count_their_bytes_and_inlined_ones_none() {
        let strings = ["short", "a string longer than twelve bytes", "exactly12byt"];
        let views = arrow::array::StringViewArray::from_iter_values(strings);
        assert_eq!(long_view_bytes(views.views()), strings[1].len());
    }
}
