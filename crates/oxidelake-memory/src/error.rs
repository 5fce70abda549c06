//! Errors of the memory layer.

use oxidelake_core::{BoxError, EngineError, MemoryTier};

/// Everything that can go wrong while allocating or spilling.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The allocator returned no memory.
    #[error("allocation of {len_bytes} bytes aligned to {align_bytes} failed")]
    Alloc {
        /// Requested size.
        len_bytes: usize,
        /// Requested alignment.
        align_bytes: usize,
    },
    /// A buffer size or alignment that cannot be represented.
    #[error("invalid layout: {0}")]
    Layout(#[source] EngineError),
    /// A tier cannot take a batch even after demoting everything colder.
    #[error("{tier} tier over budget: {requested_bytes} bytes requested, budget {budget_bytes}")]
    OverBudget {
        /// The tier that is full.
        tier: MemoryTier,
        /// The size of the batch.
        requested_bytes: u64,
        /// The tier's budget.
        budget_bytes: u64,
    },
    /// A spill file did not decode, or decoded to something other than what was written.
    #[error("spill file {path} is unreadable: {detail}")]
    SpillFormat {
        /// The spill object's path.
        path: String,
        /// What was wrong.
        detail: String,
        /// The decoder's error, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// Reading or writing a spill object failed.
    #[error("spill I/O on {path} failed: {source}")]
    SpillIo {
        /// The spill object's path.
        path: String,
        /// The object store's error.
        #[source]
        source: object_store::Error,
    },
    /// A batch id the manager does not know (never registered, or released).
    #[error("unknown batch id {0}")]
    UnknownBatch(u64),
    /// Configuration outside its domain.
    #[error("invalid spill configuration: {0}")]
    Config(String),
    /// A CUDA driver call failed while allocating pinned memory.
    #[error("CUDA driver: {operation} failed: {detail}")]
    Driver {
        /// The driver operation.
        operation: &'static str,
        /// The driver's message.
        detail: String,
    },
}

impl From<MemoryError> for EngineError {
    fn from(err: MemoryError) -> Self {
        match err {
            MemoryError::SpillFormat {
                path,
                detail,
                source,
            } => EngineError::Format {
                path,
                detail,
                source,
            },
            MemoryError::SpillIo { path, source } => EngineError::Io {
                path,
                source: Box::new(source),
            },
            MemoryError::OverBudget {
                tier,
                requested_bytes,
                budget_bytes,
            } => EngineError::OutOfMemory {
                tier,
                requested_bytes,
                available_bytes: budget_bytes,
            },
            MemoryError::Layout(inner) => inner,
            other @ (MemoryError::Alloc { .. }
            | MemoryError::UnknownBatch(_)
            | MemoryError::Config(_)
            | MemoryError::Driver { .. }) => EngineError::Internal(other.to_string()),
        }
    }
}
