//! Errors of the versioned table layer.

use std::path::PathBuf;

use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use datafusion::error::DataFusionError;
use deltalake_core::DeltaTableError;
use oxidelake_core::EngineError;

/// Everything that can go wrong naming, reading or appending to a table.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogError {
    /// A table name that is not `namespace.table` of identifier characters.
    #[error("invalid table name {name:?}: {reason}")]
    InvalidTableName {
        /// The text given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Another writer committed first: the table is not at the expected version.
    #[error("table {table} is at version {actual}, expected {expected}")]
    VersionConflict {
        /// The table.
        table: String,
        /// The version the caller based its append on.
        expected: i64,
        /// The version found.
        actual: i64,
    },
    /// `create_table` on a name that already has a table.
    #[error("table {table} already exists")]
    TableExists {
        /// The table.
        table: String,
    },
    /// No table of that name.
    #[error("table {table} does not exist")]
    TableNotFound {
        /// The table.
        table: String,
    },
    /// A snapshot was asked for a version the table does not have (or no longer has).
    #[error("table {table} has no version {version} (latest is {latest})")]
    VersionNotFound {
        /// The table.
        table: String,
        /// The version asked for.
        version: i64,
        /// The table's latest version.
        latest: i64,
    },
    /// A column type that Delta Lake would store as a different type, so that the schema
    /// read back would differ from the one created (unsigned integers, fixed-size binary,
    /// nanosecond timestamps, ...).
    #[error(
        "column {column} of table {table} has type {data_type}, which does not round-trip through Delta Lake"
    )]
    UnsupportedColumnType {
        /// The table.
        table: String,
        /// The top-level column.
        column: String,
        /// Its Arrow type.
        data_type: DataType,
    },
    /// An appended batch whose schema is not the table's.
    #[error("batch schema does not match table {table}: expected [{expected}], found [{found}]")]
    SchemaMismatch {
        /// The table.
        table: String,
        /// The table's schema.
        expected: SchemaRef,
        /// The batch's schema.
        found: SchemaRef,
    },
    /// The data directory cannot hold tables (for example a path that is not UTF-8).
    #[error("data directory {path:?} cannot be used: {reason}")]
    InvalidDataDir {
        /// The directory.
        path: PathBuf,
        /// Why not.
        reason: &'static str,
    },
    /// A filesystem operation on the catalog's directories failed.
    #[error("I/O error at {path:?}: {source}")]
    Io {
        /// The path operated on.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Writing a new data file of an append into the table's directory failed (a full
    /// disk, an I/O error); nothing was committed and the append's other files were
    /// deleted again.
    #[error("table {table}: writing data file {path:?} failed: {source}")]
    DataFileWrite {
        /// The table.
        table: String,
        /// The data file.
        path: PathBuf,
        /// The store's error (boxed: it is large).
        source: Box<deltalake_core::ObjectStoreError>,
    },
    /// The Delta Lake layer failed for another reason than a version conflict.
    #[error("Delta Lake error on table {table}: {source}")]
    Delta {
        /// The table.
        table: String,
        /// The underlying error (boxed: it is large).
        source: Box<DeltaTableError>,
    },
    /// Reading a snapshot through DataFusion failed.
    #[error("DataFusion error: {source}")]
    DataFusion {
        /// The underlying error (boxed: it is large).
        source: Box<DataFusionError>,
    },
    /// A data file that a committed version lists is not on disk (or is not a regular
    /// file). Reading the version would silently lose its rows, so it fails instead.
    #[error("table {table} version {version}: committed data file {path:?} is missing")]
    MissingDataFile {
        /// The table.
        table: String,
        /// The version read.
        version: i64,
        /// The file's local path.
        path: PathBuf,
    },
    /// A data file that a committed version lists has another size than the log recorded
    /// (truncated or overwritten).
    #[error(
        "table {table} version {version}: data file {path:?} has {actual_bytes} bytes, the log recorded {expected_bytes}"
    )]
    DataFileSizeMismatch {
        /// The table.
        table: String,
        /// The version read.
        version: i64,
        /// The file's local path.
        path: PathBuf,
        /// The size recorded in the Delta log.
        expected_bytes: u64,
        /// The size on disk.
        actual_bytes: u64,
    },
    /// A data file path in the Delta log that does not name a local file.
    #[error("table {table}: data file path {path:?} cannot be used: {reason}")]
    InvalidDataFilePath {
        /// The table.
        table: String,
        /// The path as the log (or the snapshot) gives it.
        path: String,
        /// Why not.
        reason: &'static str,
    },
    /// A commit file of the Delta log that a read depends on is damaged (empty, not
    /// JSON, cut off) or missing from the middle of the log.
    #[error("table {table}: Delta log entry {path:?} of version {version} is corrupt: {reason}")]
    CorruptLogEntry {
        /// The table.
        table: String,
        /// The version whose commit file it is.
        version: i64,
        /// The commit file.
        path: PathBuf,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The version's commit landed (readers already see it) but `fsync`ing it failed,
    /// so a power loss may still take it away. Do not append the same rows again blindly:
    /// re-read [`crate::Catalog::version`] and the snapshot first.
    #[error(
        "table {table}: version {version} was committed but could not be made durable at {path:?}: {source}"
    )]
    CommitNotDurable {
        /// The table.
        table: String,
        /// The version that landed.
        version: i64,
        /// The file or directory whose `fsync` failed.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Columns asked of [`crate::read_columns`] that the snapshot cannot give.
    #[error("table {table}: cannot read column {column:?}: {reason}")]
    InvalidProjection {
        /// The table.
        table: String,
        /// The column named.
        column: String,
        /// Why not.
        reason: &'static str,
    },
    /// Conforming a batch to the table schema failed.
    #[error("Arrow error: {source}")]
    Arrow {
        /// The underlying error.
        #[from]
        source: ArrowError,
    },
}

impl CatalogError {
    /// Wraps a Delta error with the table it happened on.
    pub(crate) fn delta(table: &impl ToString, source: DeltaTableError) -> Self {
        Self::Delta {
            table: table.to_string(),
            source: Box::new(source),
        }
    }

    /// Wraps an I/O error with the path it happened at.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

impl From<DataFusionError> for CatalogError {
    fn from(source: DataFusionError) -> Self {
        Self::DataFusion {
            source: Box::new(source),
        }
    }
}

impl From<CatalogError> for EngineError {
    fn from(err: CatalogError) -> Self {
        let detail = err.to_string();
        match err {
            CatalogError::MissingDataFile { path, .. } => EngineError::io(
                path.display().to_string(),
                std::io::Error::new(std::io::ErrorKind::NotFound, detail),
            ),
            CatalogError::CommitNotDurable { path, source, .. } => EngineError::io(
                path.display().to_string(),
                std::io::Error::new(source.kind(), detail),
            ),
            CatalogError::DataFileWrite { path, .. } => {
                EngineError::io(path.display().to_string(), std::io::Error::other(detail))
            }
            CatalogError::DataFileSizeMismatch { path, .. }
            | CatalogError::CorruptLogEntry { path, .. } => EngineError::Format {
                path: path.display().to_string(),
                detail,
                source: None,
            },
            _ => EngineError::InvalidArgument {
                what: "table operation",
                detail,
            },
        }
    }
}
