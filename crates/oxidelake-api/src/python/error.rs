//! Engine errors as Python exceptions with a `kind`.

use datafusion::error::DataFusionError;
use oxidelake_runtime::EngineError;
use pyo3::prelude::*;

pyo3::create_exception!(
    oxidelake,
    OxideLakeError,
    pyo3::exceptions::PyException,
    "An error of the OxideLake engine; `kind` says which (sql, plan, io, …)."
);

/// The exception for `error`: its message, and its kind as the `kind` attribute.
pub(super) fn to_py(py: Python<'_>, error: &EngineError) -> PyErr {
    let err = OxideLakeError::new_err(error.to_string());
    // Setting an attribute on a fresh exception object cannot fail in practice; if it
    // did, the exception still carries the message.
    let _ = err.value(py).setattr("kind", kind(error));
    err
}

/// A short, stable name for what went wrong.
pub(super) fn kind(error: &EngineError) -> &'static str {
    match error {
        EngineError::Unsupported { .. } => "unsupported",
        EngineError::Format { .. } => "format",
        EngineError::Io { .. } => "io",
        EngineError::Device { .. } => "device",
        EngineError::BackendUnavailable { .. } => "backend_unavailable",
        EngineError::KernelCompile { .. } => "kernel_compile",
        EngineError::OutOfMemory { .. } => "out_of_memory",
        EngineError::InvalidArgument { .. } => "invalid_argument",
        EngineError::Arrow(_) => "arrow",
        EngineError::DataFusion(e) => datafusion_kind(e),
        EngineError::Internal(_) => "internal",
        // A kind added to the engine after this list.
        _ => "engine",
    }
}

fn datafusion_kind(error: &DataFusionError) -> &'static str {
    match error.find_root() {
        DataFusionError::SQL(..) => "sql",
        DataFusionError::Plan(_) => "plan",
        DataFusionError::SchemaError(..) => "schema",
        DataFusionError::ResourcesExhausted(_) => "resources_exhausted",
        DataFusionError::IoError(_) | DataFusionError::ObjectStore(_) => "io",
        DataFusionError::NotImplemented(_) => "unsupported",
        DataFusionError::Configuration(_) => "invalid_argument",
        _ => "execution",
    }
}
