//! A generated lake dataset with known layout.

use std::sync::Arc;

use arrow::array::{Float64Array, Int64Array, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use arrow::record_batch::RecordBatch;
use oxidelake_storage::{LakeWriterOptions, WrittenFile, write_parquet_file};

/// Rows per row group of the generated files (two engine batches).
pub const ROW_GROUP_ROWS: usize = 2 * oxidelake_storage::ENGINE_BATCH_ROWS;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("k", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
        Field::new("tag", DataType::Utf8, true),
    ]))
}

/// `k` of row `id`: even numbers scattered over the whole range in every row group, so
/// min/max statistics cannot exclude a `k = v` predicate but a Bloom filter can.
pub fn k_of(id: i64) -> i64 {
    (id * 7919 % 1_000_003) * 2
}

/// Rows `start..start + rows` with `id` ascending (min/max on `id` prune ranges).
pub fn batch(start: i64, rows: usize) -> RecordBatch {
    let ids: Vec<i64> = (start..start + rows as i64).collect();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids.clone())),
            Arc::new(Int64Array::from_iter_values(ids.iter().map(|i| k_of(*i)))),
            Arc::new(Float64Array::from_iter(
                ids.iter().map(|i| (i % 7 != 0).then_some(*i as f64 * 0.5)),
            )),
            Arc::new(StringArray::from_iter(
                ids.iter()
                    .map(|i| (i % 5 != 0).then(|| format!("t{}", i % 13))),
            )),
        ],
    )
    .unwrap()
}

/// Writes `row_groups` row groups of [`ROW_GROUP_ROWS`] rows starting at `start` to
/// `path`, with a Bloom filter on `k` and page statistics.
pub fn write_dataset(
    path: &std::path::Path,
    start: i64,
    row_groups: usize,
    options: LakeWriterOptions,
) -> WrittenFile {
    let batches: Vec<RecordBatch> = (0..row_groups * 2)
        .map(|i| {
            batch(
                start + (i * oxidelake_storage::ENGINE_BATCH_ROWS) as i64,
                oxidelake_storage::ENGINE_BATCH_ROWS,
            )
        })
        .collect();
    write_parquet_file(
        path,
        schema(),
        &batches,
        &options.with_batches_per_row_group(2).with_bloom_filter("k"),
    )
    .unwrap()
}

/// Rows of `batches` as `v1|v2|...` strings, sorted (order-insensitive comparison).
pub fn sorted_rows(batches: &[RecordBatch]) -> Vec<String> {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    let options = FormatOptions::default().with_null("NULL");
    let mut rows = Vec::new();
    for batch in batches {
        let formatters: Vec<ArrayFormatter> = batch
            .columns()
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            let values: Vec<String> = formatters
                .iter()
                .map(|f| f.value(row).to_string())
                .collect();
            rows.push(values.join("|"));
        }
    }
    rows.sort();
    rows
}
