//! Errors of the managed object store.

use oxidelake_core::EngineError;

use crate::Sha256Digest;

/// Everything that can go wrong storing or reading a managed object.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The bytes read do not hash to the digest recorded when they were written.
    #[error("object {uri} is corrupt: expected sha256 {expected}, read {actual}")]
    DigestMismatch {
        /// The object.
        uri: String,
        /// The recorded digest.
        expected: Sha256Digest,
        /// The digest of what was read.
        actual: Sha256Digest,
    },
    /// A digest string that is not 64 hex characters.
    #[error("invalid sha256 digest {0:?}")]
    InvalidDigest(String),
    /// The bytes read are not as many as recorded when they were written.
    #[error("object {uri} is corrupt: expected {expected} bytes, found {actual}")]
    SizeMismatch {
        /// The object.
        uri: String,
        /// The recorded size.
        expected: u64,
        /// The size found.
        actual: u64,
    },
    /// A location that is not inside this managed store (or not a `file://` URI).
    #[error("refusing to open {uri}: {reason}")]
    OutsideStore {
        /// The location's URI.
        uri: String,
        /// Why it is refused.
        reason: String,
    },
    /// A DataLocation column value that cannot be a location.
    #[error("invalid data location: {0}")]
    InvalidLocation(String),
    /// A retention that is not a finite, non-negative duration within range.
    #[error("invalid retention {0}")]
    InvalidRetention(String),
    /// A retention below the safety floor, without the explicit override.
    #[error(
        "refusing a retention of {requested:?}: below the floor of {floor:?}, objects of \
         INSERTs still in flight could be deleted (override explicitly to force it)"
    )]
    RetentionBelowFloor {
        /// The retention asked for.
        requested: std::time::Duration,
        /// The floor.
        floor: std::time::Duration,
    },
    /// Something other than a regular file where the store reads one (an object's
    /// address, an upload's or a pin's file): refused before a byte is read, since a
    /// FIFO's reader waits for a writer forever.
    #[error("refusing to read {path}: it is a {kind}, not a regular file")]
    NotRegularFile {
        /// Where it is.
        path: String,
        /// What it is: `FIFO`, `directory`, `socket`, `device` or `special file`.
        kind: &'static str,
    },
    /// Reading or writing the object failed.
    #[error("I/O on {uri} failed: {source}")]
    Io {
        /// The object or local file.
        uri: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl From<ObjectError> for EngineError {
    fn from(err: ObjectError) -> Self {
        match err {
            ObjectError::Io { uri, source } => EngineError::io(uri, source),
            ObjectError::DigestMismatch {
                uri,
                expected,
                actual,
            } => EngineError::Format {
                path: uri,
                detail: format!("corrupt object: expected sha256 {expected}, read {actual}"),
                source: None,
            },
            ObjectError::InvalidDigest(text) => EngineError::InvalidArgument {
                what: "sha256 digest",
                detail: text,
            },
            ObjectError::SizeMismatch {
                uri,
                expected,
                actual,
            } => EngineError::Format {
                path: uri,
                detail: format!("corrupt object: expected {expected} bytes, found {actual}"),
                source: None,
            },
            ObjectError::OutsideStore { uri, reason } => EngineError::InvalidArgument {
                what: "data location",
                detail: format!("{uri}: {reason}"),
            },
            ObjectError::InvalidLocation(detail) => EngineError::InvalidArgument {
                what: "data location",
                detail,
            },
            ObjectError::InvalidRetention(detail) => EngineError::InvalidArgument {
                what: "retention",
                detail,
            },
            err @ ObjectError::RetentionBelowFloor { .. } => EngineError::InvalidArgument {
                what: "retention",
                detail: err.to_string(),
            },
            ObjectError::NotRegularFile { path, kind } => EngineError::io(
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("it is a {kind}, not a regular file"),
                ),
            ),
        }
    }
}

/// Maps an I/O error on `uri` to [`ObjectError::Io`] (for `map_err`).
pub(crate) fn io(uri: impl Into<String>) -> impl FnOnce(std::io::Error) -> ObjectError {
    let uri = uri.into();
    move |source| ObjectError::Io { uri, source }
}
