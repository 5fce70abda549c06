//! Writing lake Parquet the way the engine reads it best.
//!
//! - Row groups hold a whole number of engine batches ([`LakeWriterOptions::batch_rows`]
//!   × [`LakeWriterOptions::batches_per_row_group`]), and data pages at most one batch,
//!   so a pruned page or row group skips whole batches and a kept one decodes into full
//!   batches without a remainder.
//! - Statistics are written per page, which also writes the column and offset index
//!   that page-index pruning reads.
//! - Dictionary encoding stays on (Parquet falls back to plain per column when a
//!   dictionary grows too large).
//! - Split-block Bloom filters are written for the columns named as join/filter keys; they
//!   let a scan skip row groups for `=` and `IN` predicates that min/max cannot exclude.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use oxidelake_core::EngineError;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::{ParquetCompression, StorageError};

/// DataFusion's default batch size, which the engine runs with.
pub const ENGINE_BATCH_ROWS: usize = 8192;

/// How OxideLake writes a Parquet dataset.
#[derive(Debug, Clone, PartialEq)]
pub struct LakeWriterOptions {
    /// Page compression.
    pub compression: ParquetCompression,
    /// The engine's batch size; pages hold at most this many rows.
    pub batch_rows: usize,
    /// Batches per row group (row groups hold `batch_rows * batches_per_row_group` rows).
    pub batches_per_row_group: usize,
    /// Columns that get a split-block Bloom filter (top-level column names).
    pub bloom_filter_columns: Vec<String>,
    /// Target false-positive probability of each Bloom filter.
    pub bloom_filter_fpp: f64,
    /// Dictionary encoding.
    pub dictionary: bool,
}

impl Default for LakeWriterOptions {
    fn default() -> Self {
        Self {
            compression: ParquetCompression::default(),
            batch_rows: ENGINE_BATCH_ROWS,
            batches_per_row_group: 16,
            bloom_filter_columns: Vec::new(),
            bloom_filter_fpp: 0.01,
            dictionary: true,
        }
    }
}

impl LakeWriterOptions {
    /// Adds a Bloom filter on `column` (a join or filter key).
    pub fn with_bloom_filter(mut self, column: impl Into<String>) -> Self {
        self.bloom_filter_columns.push(column.into());
        self
    }

    /// Sets the compression codec.
    pub fn with_compression(mut self, compression: ParquetCompression) -> Self {
        self.compression = compression;
        self
    }

    /// Sets how many engine batches a row group holds.
    pub fn with_batches_per_row_group(mut self, batches: usize) -> Self {
        self.batches_per_row_group = batches;
        self
    }

    /// Rows per row group.
    pub fn row_group_rows(&self) -> usize {
        self.batch_rows.saturating_mul(self.batches_per_row_group)
    }

    /// The parquet writer properties for `schema`. Fails on zero sizes, an FPP outside
    /// (0, 1), or a Bloom filter column `schema` does not have (parquet would silently
    /// ignore it, leaving a dataset that cannot be pruned the way the caller expects).
    pub fn writer_properties(&self, schema: &SchemaRef) -> Result<WriterProperties, StorageError> {
        let invalid =
            |what: &'static str, detail: String| StorageError::InvalidOption { what, detail };
        if self.batch_rows == 0 || self.batches_per_row_group == 0 {
            return Err(invalid(
                "row group size",
                format!(
                    "{} rows per batch x {} batches per row group",
                    self.batch_rows, self.batches_per_row_group
                ),
            ));
        }
        if !(self.bloom_filter_fpp > 0.0 && self.bloom_filter_fpp < 1.0) {
            return Err(invalid(
                "bloom filter fpp",
                format!("{} is not in (0, 1)", self.bloom_filter_fpp),
            ));
        }
        let mut builder = WriterProperties::builder()
            .set_max_row_group_row_count(Some(self.row_group_rows()))
            .set_data_page_row_count_limit(self.batch_rows)
            .set_write_batch_size(self.batch_rows)
            .set_compression(self.compression.codec()?)
            .set_dictionary_enabled(self.dictionary)
            .set_statistics_enabled(EnabledStatistics::Page);
        for column in &self.bloom_filter_columns {
            let field = schema.field_with_name(column).map_err(|_| {
                invalid(
                    "bloom filter column",
                    format!("{column:?} is not a column of the dataset"),
                )
            })?;
            if field.data_type().is_nested() {
                return Err(invalid(
                    "bloom filter column",
                    format!(
                        "{column:?} is {}; Bloom filters need a leaf column",
                        field.data_type()
                    ),
                ));
            }
            let path = ColumnPath::new(vec![column.clone()]);
            builder = builder
                .set_column_bloom_filter_enabled(path.clone(), true)
                .set_column_bloom_filter_fpp(path.clone(), self.bloom_filter_fpp)
                .set_column_bloom_filter_max_ndv(path, self.row_group_rows() as u64);
        }
        Ok(builder.build())
    }
}

/// What a finished file holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrittenFile {
    /// The file.
    pub path: PathBuf,
    /// Rows written.
    pub rows: u64,
    /// Row groups written.
    pub row_groups: usize,
    /// Bytes on disk.
    pub bytes: u64,
}

/// Streams batches into one local Parquet file with [`LakeWriterOptions`].
pub struct LakeParquetWriter {
    path: PathBuf,
    writer: ArrowWriter<File>,
}

impl std::fmt::Debug for LakeParquetWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LakeParquetWriter")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl LakeParquetWriter {
    /// Creates (or truncates) `path` for batches of `schema`.
    pub fn create(
        path: impl AsRef<Path>,
        schema: SchemaRef,
        options: &LakeWriterOptions,
    ) -> Result<Self, EngineError> {
        let path = path.as_ref().to_path_buf();
        let props = options.writer_properties(&schema)?;
        let file =
            File::create(&path).map_err(|e| EngineError::io(path.display().to_string(), e))?;
        let writer = ArrowWriter::try_new(file, schema, Some(props)).map_err(|source| {
            StorageError::Parquet {
                path: path.display().to_string(),
                source,
            }
        })?;
        Ok(Self { path, writer })
    }

    /// Appends a batch (buffered until a row group is full).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), EngineError> {
        self.writer
            .write(batch)
            .map_err(|source| self.error(source))
    }

    /// Writes the footer and closes the file.
    pub fn finish(self) -> Result<WrittenFile, EngineError> {
        let Self { path, writer } = self;
        let name = path.display().to_string();
        let meta = writer.close().map_err(|source| StorageError::Parquet {
            path: name.clone(),
            source,
        })?;
        let bytes = std::fs::metadata(&path)
            .map_err(|e| EngineError::io(name, e))?
            .len();
        Ok(WrittenFile {
            rows: meta.file_metadata().num_rows().max(0) as u64,
            row_groups: meta.num_row_groups(),
            bytes,
            path,
        })
    }

    fn error(&self, source: parquet::errors::ParquetError) -> EngineError {
        match source {
            parquet::errors::ParquetError::External(e) => {
                EngineError::io(self.path.display().to_string(), e)
            }
            source => StorageError::Parquet {
                path: self.path.display().to_string(),
                source,
            }
            .into(),
        }
    }
}

/// Writes `batches` to `path` as one Parquet file.
pub fn write_parquet_file(
    path: impl AsRef<Path>,
    schema: SchemaRef,
    batches: &[RecordBatch],
    options: &LakeWriterOptions,
) -> Result<WrittenFile, EngineError> {
    let mut writer = LakeParquetWriter::create(path, schema, options)?;
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::Int64, false),
            Field::new("tags", DataType::new_list(DataType::Utf8, true), true),
        ]))
    }

    #[test]
    fn row_groups_hold_whole_engine_batches_and_pages_at_most_one() {
        let options = LakeWriterOptions::default().with_bloom_filter("id");
        let props = options.writer_properties(&schema()).unwrap();
        assert_eq!(
            props.max_row_group_row_count(),
            Some(16 * ENGINE_BATCH_ROWS)
        );
        assert_eq!(props.data_page_row_count_limit(), ENGINE_BATCH_ROWS);
        let id = ColumnPath::new(vec!["id".into()]);
        assert!(props.bloom_filter_properties(&id).is_some());
        assert_eq!(props.statistics_enabled(&id), EnabledStatistics::Page);
    }

    #[test]
    fn a_bloom_filter_on_a_missing_or_nested_column_is_rejected() {
        let missing = LakeWriterOptions::default().with_bloom_filter("nope");
        assert!(matches!(
            missing.writer_properties(&schema()),
            Err(StorageError::InvalidOption { .. })
        ));
        let nested = LakeWriterOptions::default().with_bloom_filter("tags");
        assert!(nested.writer_properties(&schema()).is_err());
        let zero = LakeWriterOptions::default().with_batches_per_row_group(0);
        assert!(zero.writer_properties(&schema()).is_err());
    }
}
