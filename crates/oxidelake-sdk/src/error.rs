//! Errors of the SDK.

use oxidelake_core::EngineError;

/// Everything `LakeClient` can refuse or fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SdkError {
    /// A statement outside the supported INSERT grammar (nothing was uploaded).
    #[error("unsupported statement: {0}")]
    UnsupportedSyntax(String),
    /// Placeholders and columns (or parameters) do not pair up.
    #[error("{columns} columns but {placeholders} placeholders/parameters")]
    PlaceholderCount {
        /// Columns named.
        columns: usize,
        /// Placeholders or parameters given.
        placeholders: usize,
    },
    /// A column the table does not have.
    #[error("table {table} has no column {column}")]
    UnknownColumn {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },
    /// A parameter whose type the column cannot hold.
    #[error("column {column} is {expected}, the parameter is {got}")]
    TypeMismatch {
        /// The column.
        column: String,
        /// The column's type.
        expected: String,
        /// The parameter's kind.
        got: &'static str,
    },
    /// A NOT NULL column the statement leaves out (or sets to NULL).
    #[error("column {0} cannot be NULL")]
    MissingValue(String),
    /// Appending kept losing the version race.
    #[error("table {table} changed under {attempts} append attempts; giving up")]
    Contended {
        /// The table.
        table: String,
        /// Attempts made.
        attempts: usize,
    },
    /// A path given as a data directory that holds no lake.
    #[error("{} is not an OxideLake data directory (no tables/ or objects/ in it)", path.display())]
    NoLake {
        /// The path.
        path: std::path::PathBuf,
    },
    /// The object store refused or failed (nothing was committed).
    #[error(transparent)]
    Object(#[from] oxidelake_objects::ObjectError),
    /// The table layer failed.
    #[error(transparent)]
    Catalog(#[from] oxidelake_catalog::CatalogError),
    /// An error from the engine.
    #[error(transparent)]
    Engine(#[from] EngineError),
}
