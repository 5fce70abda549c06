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
            StorageError::InvalidOption { what, detail } => {
                EngineError::InvalidArgument { what, detail }
            }
        }
    }
}
