//! Errors of the versioned table layer.

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
}

impl From<CatalogError> for EngineError {
    fn from(err: CatalogError) -> Self {
        EngineError::InvalidArgument {
            what: "table operation",
            detail: err.to_string(),
        }
    }
}
