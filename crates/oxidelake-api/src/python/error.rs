//! Engine and lake errors as Python exceptions with a `kind`.

use datafusion::error::DataFusionError;
use oxidelake_runtime::EngineError;
use oxidelake_sdk::{CatalogError, ObjectError, SdkError};
use pyo3::prelude::*;

pyo3::create_exception!(
    oxidelake,
    OxideLakeError,
    pyo3::exceptions::PyException,
    "An error of the OxideLake engine or lake; `kind` says which (sql, plan, io, …)."
);

/// An error the bindings raise as `OxideLakeError`: its message and a short, stable
/// name for what went wrong (the exception's `kind` attribute).
pub(super) trait ErrorKind: std::fmt::Display {
    /// The `kind` attribute.
    fn kind(&self) -> &'static str;
}

/// The exception for `error`: its message, and its kind as the `kind` attribute.
pub(super) fn to_py(py: Python<'_>, error: &impl ErrorKind) -> PyErr {
    let err = OxideLakeError::new_err(error.to_string());
    // Setting an attribute on a fresh exception object cannot fail in practice; if it
    // did, the exception still carries the message.
    let _ = err.value(py).setattr("kind", error.kind());
    err
}

impl ErrorKind for EngineError {
    fn kind(&self) -> &'static str {
        match self {
            EngineError::Unsupported { .. } => "unsupported",
            EngineError::Format { .. } => "format",
            EngineError::Io { source, .. }
                if source
                    .downcast_ref::<std::io::Error>()
                    .is_some_and(is_not_found) =>
            {
                "not_found"
            }
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

impl ErrorKind for SdkError {
    fn kind(&self) -> &'static str {
        match self {
            // An INSERT outside the narrow grammar LakeClient executes.
            SdkError::UnsupportedSyntax(_) => "sql",
            SdkError::PlaceholderCount { .. } => "placeholder_count",
            SdkError::UnknownColumn { .. } => "unknown_column",
            SdkError::TypeMismatch { .. } => "type_mismatch",
            SdkError::MissingValue(_) => "missing_value",
            SdkError::Contended { .. } => "contended",
            SdkError::NoLake { .. } => "no_lake",
            SdkError::Object(e) => e.kind(),
            SdkError::Catalog(e) => e.kind(),
            SdkError::Engine(e) => e.kind(),
            _ => "lake",
        }
    }
}

impl ErrorKind for ObjectError {
    fn kind(&self) -> &'static str {
        match self {
            ObjectError::DigestMismatch { .. } | ObjectError::SizeMismatch { .. } => {
                "corrupt_object"
            }
            ObjectError::InvalidDigest(_) | ObjectError::InvalidLocation(_) => "invalid_location",
            ObjectError::OutsideStore { .. } => "outside_store",
            ObjectError::InvalidRetention(_) | ObjectError::RetentionBelowFloor { .. } => {
                "invalid_retention"
            }
            ObjectError::Io { source, .. } if is_not_found(source) => "not_found",
            ObjectError::Io { .. } => "io",
            _ => "object",
        }
    }
}

impl ErrorKind for CatalogError {
    fn kind(&self) -> &'static str {
        match self {
            CatalogError::TableNotFound { .. } => "table_not_found",
            CatalogError::TableExists { .. } => "table_exists",
            CatalogError::VersionConflict { .. } => "version_conflict",
            CatalogError::InvalidTableName { .. } => "invalid_argument",
            CatalogError::UnsupportedColumnType { .. } => "unsupported",
            _ => "catalog",
        }
    }
}

fn is_not_found(error: &std::io::Error) -> bool {
    error.kind() == std::io::ErrorKind::NotFound
}
