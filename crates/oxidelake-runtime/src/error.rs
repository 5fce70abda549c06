//! Errors of sessions and cluster plumbing.

use oxidelake_core::EngineError;

/// Errors raised by the runtime itself (engine errors pass through as [`EngineError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A cluster address that is not `df://host:port`.
    #[error("invalid cluster URL {url:?}: {reason}")]
    InvalidClusterUrl {
        /// The text given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl From<RuntimeError> for EngineError {
    fn from(err: RuntimeError) -> Self {
        match err {
            RuntimeError::InvalidClusterUrl { url, reason } => EngineError::InvalidArgument {
                what: "cluster URL",
                detail: format!("{url:?}: {reason}"),
            },
        }
    }
}
