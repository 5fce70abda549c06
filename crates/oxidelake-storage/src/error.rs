//! Errors of the storage layer.

use oxidelake_core::EngineError;

/// Everything that can go wrong reading or writing lake files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// A Parquet file that does not decode (corrupt or truncated).
    #[error("Parquet file {path} is unreadable: {source}")]
    Parquet {
        /// The file.
        path: String,
        /// Parquet's error.
        #[source]
        source: parquet::errors::ParquetError,
    },
    /// A Parquet trailer announcing a footer that does not fit in its file, refused by
    /// [`crate::ParquetFooterGuard`] before the Parquet decoder sees it.
    #[error("Parquet file {path} is unreadable: {detail}")]
    ParquetFooter {
        /// The object, as its store names it.
        path: String,
        /// What does not fit.
        detail: String,
    },
    /// An object-store operation failed.
    #[error("object store operation on {path} failed: {source}")]
    ObjectStore {
        /// The object.
        path: String,
        /// The store's error.
        #[source]
        source: object_store::Error,
    },
    /// Two files of one table type a column in ways that do not merge (`Int64` and
    /// `Utf8`): each file reads, the table does not. Boxed: the variant is the largest.
    #[error("{0}")]
    ColumnTypeClash(Box<ColumnTypeClash>),
    /// An option value outside its domain.
    #[error("invalid {what}: {detail}")]
    InvalidOption {
        /// Which option.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
}

impl From<StorageError> for EngineError {
    fn from(err: StorageError) -> Self {
        match err {
            StorageError::Parquet { path, source } => {
                EngineError::format(path, "invalid Parquet", source)
            }
            StorageError::ParquetFooter { path, detail } => EngineError::Format {
                path,
                detail,
                source: None,
            },
            StorageError::ObjectStore { path, source } => EngineError::io(path, source),
            StorageError::ColumnTypeClash(clash) => EngineError::Format {
                detail: clash.to_string(),
                path: clash.table,
                source: None,
            },
            StorageError::InvalidOption { what, detail } => {
                EngineError::InvalidArgument { what, detail }
            }
        }
    }
}

/// What [`StorageError::ColumnTypeClash`] says: the column, the two files and the two types.
#[derive(Debug, thiserror::Error)]
#[error(
    "column {column:?} is {first_type} in {first_file} but {second_type} in \
     {second_file}; the files of table {table} must agree on each column's type"
)]
pub struct ColumnTypeClash {
    /// The table's location, as it was registered.
    pub table: String,
    /// The column.
    pub column: String,
    /// The first file (in path order) that has the column.
    pub first_file: String,
    /// Its type there (merged with any files between).
    pub first_type: arrow::datatypes::DataType,
    /// The file whose type for it does not merge.
    pub second_file: String,
    /// Its type there.
    pub second_type: arrow::datatypes::DataType,
}
