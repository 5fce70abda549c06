//! A FILE-like table schema, batches for it, and helpers to inspect a table directory.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
use arrow::compute::{concat_batches, sort_to_indices, take_record_batch};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use oxidelake_catalog::{Catalog, TableName};

pub fn episodes() -> TableName {
    "robots.episodes".parse().unwrap()
}

/// The FILE column type: `Struct{uri, mime, size: Int64, sha256}`.
pub fn file_fields() -> Fields {
    Fields::from(vec![
        Field::new("uri", DataType::Utf8, false),
        Field::new("mime", DataType::Utf8, true),
        Field::new("size", DataType::Int64, false),
        Field::new("sha256", DataType::Utf8, false),
    ])
}

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("id", DataType::Int64, false),
        Field::new("name", DataType::Utf8, true),
        Field::new("file", DataType::Struct(file_fields()), true),
    ]))
}

/// One row per id; every third row has a NULL file, every fourth a NULL mime type.
pub fn batch(ids: impl IntoIterator<Item = i64>) -> RecordBatch {
    let ids: Vec<i64> = ids.into_iter().collect();
    let names: Vec<String> = ids.iter().map(|id| format!("episode-{id}")).collect();
    let uris: Vec<String> = ids
        .iter()
        .map(|id| format!("file:///data/objects/{id}.mcap"))
        .collect();
    let mimes: Vec<Option<&str>> = ids
        .iter()
        .map(|id| (id % 4 != 0).then_some("application/x-mcap"))
        .collect();
    let digests: Vec<String> = ids.iter().map(|id| format!("{id:064x}")).collect();
    let file_nulls: Vec<bool> = ids.iter().map(|id| id % 3 != 0).collect();
    let file = StructArray::try_new(
        file_fields(),
        vec![
            Arc::new(StringArray::from(uris)) as ArrayRef,
            Arc::new(StringArray::from(mimes)),
            Arc::new(Int64Array::from(
                ids.iter().map(|id| 1_000 + id).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(digests)),
        ],
        Some(file_nulls.into()),
    )
    .unwrap();
    RecordBatch::try_new(
        schema(),
        vec![
            Arc::new(Int64Array::from(ids)),
            Arc::new(StringArray::from(names)),
            Arc::new(file),
        ],
    )
    .unwrap()
}

/// All rows of `batches` in one batch, sorted by `id`.
pub fn sorted_by_id(batches: &[RecordBatch], schema: &SchemaRef) -> RecordBatch {
    let all = concat_batches(schema, batches).unwrap();
    let order = sort_to_indices(all.column(0), None, None).unwrap();
    take_record_batch(&all, &order).unwrap()
}

pub fn ids(batch: &RecordBatch) -> Vec<i64> {
    let column = batch.column(0);
    let ids = column.as_any().downcast_ref::<Int64Array>().unwrap();
    assert_eq!(ids.null_count(), 0);
    ids.values().to_vec()
}

/// A fresh catalog in a temporary directory, with `robots.episodes` created.
pub async fn catalog_with_episodes() -> (tempfile::TempDir, Catalog) {
    let dir = tempfile::tempdir().unwrap();
    let catalog = Catalog::open(dir.path()).unwrap();
    catalog.create_table(&episodes(), schema()).await.unwrap();
    (dir, catalog)
}

/// Number of entries in a directory (files and sub-directories).
pub fn entries(dir: &Path) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// Number of Parquet files directly in a table directory.
pub fn parquet_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".parquet")
        })
        .count()
}
