//! Errors of the io_uring store, and how they map onto `object_store::Error`.

use std::io;
use std::path::PathBuf;

use super::probe::UringUnavailable;

/// The name the store gives `object_store::Error::Generic`.
pub(crate) const STORE_NAME: &str = "UringLocalFileSystem";

/// Everything that can go wrong in the io_uring store.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UringError {
    /// io_uring cannot be set up in this process.
    #[error(transparent)]
    Unavailable(#[from] UringUnavailable),
    /// The ring thread could not be started.
    #[error("unable to start the io_uring thread or its wake-up pipe: {source}")]
    StartThread {
        /// The spawn error.
        #[source]
        source: io::Error,
    },
    /// The ring thread has stopped (its ring failed); no more operations run.
    #[error("the io_uring thread has stopped")]
    RingStopped,
    /// The object does not exist (or is a directory).
    #[error("object {} not found: {source}", path.display())]
    NotFound {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `PutMode::Create` found an object already there.
    #[error("object {} already exists: {source}", path.display())]
    AlreadyExists {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A file or directory could not be opened or created.
    #[error("unable to open {}: {source}", path.display())]
    Open {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `fstat` failed, or the platform has no modification time.
    #[error("unable to read metadata of {}: {source}", path.display())]
    Metadata {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// An `IORING_OP_READ` failed.
    #[error("reading {} at offset {offset_bytes} failed: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Where the failed read started.
        offset_bytes: u64,
        /// The completion's error.
        #[source]
        source: io::Error,
    },
    /// An `IORING_OP_WRITE` failed or wrote nothing.
    #[error("writing {} at offset {offset_bytes} failed: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Where the failed write started.
        offset_bytes: u64,
        /// The completion's error.
        #[source]
        source: io::Error,
    },
    /// The requested range does not fit the object.
    #[error("invalid range for {}: {source}", path.display())]
    InvalidRange {
        /// The file.
        path: PathBuf,
        /// object_store's range error (its type is not exported).
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// The file ended before the requested range did.
    #[error("{} ended early: expected {expected_bytes} bytes, read {actual_bytes}", path.display())]
    OutOfRange {
        /// The file.
        path: PathBuf,
        /// Bytes the range should have held.
        expected_bytes: u64,
        /// Bytes read before end of file.
        actual_bytes: u64,
    },
    /// Moving a staged upload into place failed.
    #[error("unable to move {} to {}: {source}", from.display(), to.display())]
    Rename {
        /// The staging file.
        from: PathBuf,
        /// The destination.
        to: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

impl From<UringError> for object_store::Error {
    fn from(err: UringError) -> Self {
        match err {
            UringError::NotFound { path, source } => object_store::Error::NotFound {
                path: path.to_string_lossy().into_owned(),
                source: Box::new(source),
            },
            UringError::AlreadyExists { path, source } => object_store::Error::AlreadyExists {
                path: path.to_string_lossy().into_owned(),
                source: Box::new(source),
            },
            other => object_store::Error::Generic {
                store: STORE_NAME,
                source: Box::new(other),
            },
        }
    }
}

/// Maps an error from opening `path` like `LocalFileSystem` does: ENOENT is NotFound.
pub(crate) fn open_error(path: PathBuf, source: io::Error) -> UringError {
    match source.kind() {
        io::ErrorKind::NotFound => UringError::NotFound { path, source },
        _ => UringError::Open { path, source },
    }
}
