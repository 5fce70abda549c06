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
        EngineError::InvalidArgument {
            what: "table operation",
            detail: err.to_string(),
        }
    }
}
