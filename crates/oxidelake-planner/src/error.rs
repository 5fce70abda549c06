//! Errors of plan encoding and decoding.

use oxidelake_core::EngineError;

/// Why an OxideLake plan node could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The payload of a node did not deserialize.
    #[error("cannot decode {node} payload: {source}")]
    Decode {
        /// The node kind, e.g. `GpuFilterExec`.
        node: &'static str,
        /// postcard's error.
        #[source]
        source: postcard::Error,
    },
    /// The payload of a node did not serialize.
    #[error("cannot encode {node} payload: {source}")]
    Encode {
        /// The node kind.
        node: &'static str,
        /// postcard's error.
        #[source]
        source: postcard::Error,
    },
    /// A payload tag this version does not know (a newer client or scheduler).
    #[error("unknown OxideLake plan node tag {0}")]
    UnknownNode(u8),
}

impl From<CodecError> for EngineError {
    fn from(err: CodecError) -> Self {
        EngineError::Format {
            path: "physical plan".into(),
            detail: err.to_string(),
            source: Some(Box::new(err)),
        }
    }
}
