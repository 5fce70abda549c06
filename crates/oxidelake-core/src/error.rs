//! The engine-wide error type and its bridge to DataFusion.
//!
//! Operators live inside DataFusion and must return `DataFusionError`; the crates'
//! public APIs return [`EngineError`]. Both directions are lossless for the cases that
//! matter:
//! - an `EngineError` travelling through DataFusion is wrapped in
//!   `DataFusionError::External` and unwrapped again on the way back out, so a caller
//!   still matches on `EngineError::Format { .. }` after a query failed;
//! - device out-of-memory becomes `DataFusionError::ResourcesExhausted`, the variant
//!   DataFusion's own memory pool and spilling react to.

use std::error::Error as StdError;

use datafusion::arrow::error::ArrowError;
use datafusion::error::DataFusionError;

use crate::{BackendKind, DeviceId, MemoryTier};

/// A boxed error that can cross threads; the `source` of wrapped failures.
pub type BoxError = Box<dyn StdError + Send + Sync + 'static>;

/// Every error an OxideLake library crate returns at its public boundary.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A path the engine does not implement (yet). Never a panic, never a silent fallback.
    #[error("unsupported: {feature}: {detail}")]
    Unsupported {
        /// The feature that was asked for, e.g. `"hash join on Utf8 keys"`.
        feature: String,
        /// Why it is unsupported and what to do instead.
        detail: String,
    },

    /// Bytes that do not decode: a corrupt or truncated Parquet, IPC or spill file.
    #[error("malformed data in {path}: {detail}")]
    Format {
        /// The file or object the bytes came from.
        path: String,
        /// What was wrong with them.
        detail: String,
        /// The decoder's own error, where there is one.
        #[source]
        source: Option<BoxError>,
    },

    /// An I/O operation on a file or object failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or object the operation was on.
        path: String,
        /// The underlying error (`std::io::Error`, `object_store::Error`, ...).
        #[source]
        source: BoxError,
    },

    /// A driver or device call failed.
    #[error("device {device}: {operation} failed: {detail}")]
    Device {
        /// The device the call was made on.
        device: DeviceId,
        /// The operation, e.g. `"cuMemAlloc"` or `"nvrtc compile of hash_join.cu"`.
        operation: String,
        /// The driver's message.
        detail: String,
    },

    /// A backend was requested (by `OXIDE_BACKEND` or configuration) but cannot be used
    /// on this machine or in this build.
    #[error("backend {requested} is not available: {reason}")]
    BackendUnavailable {
        /// The backend that was asked for.
        requested: BackendKind,
        /// Why it cannot be used, e.g. "built without the `cuda` feature".
        reason: String,
    },

    /// A device kernel source failed to compile (NVRTC).
    #[error("compiling kernel {kernel} for {arch} failed:\n{log}")]
    KernelCompile {
        /// The kernel source file, e.g. `hash_join.cu`.
        kernel: String,
        /// The target architecture, e.g. `compute_90`.
        arch: String,
        /// The compiler's log.
        log: String,
    },

    /// A memory tier had no room for an allocation.
    #[error("out of {tier} memory: requested {requested_bytes} bytes, {available_bytes} available")]
    OutOfMemory {
        /// The tier that was full.
        tier: MemoryTier,
        /// The size of the failed request.
        requested_bytes: u64,
        /// What the tier had left.
        available_bytes: u64,
    },

    /// A caller passed a value outside its documented domain.
    #[error("invalid {what}: {detail}")]
    InvalidArgument {
        /// Which argument or setting.
        what: &'static str,
        /// What was wrong with it.
        detail: String,
    },

    /// An error from Arrow.
    #[error(transparent)]
    Arrow(#[from] ArrowError),

    /// An error from DataFusion that did not originate in OxideLake.
    #[error(transparent)]
    DataFusion(DataFusionError),

    /// A broken internal invariant: a bug in OxideLake, reported rather than panicking.
    #[error("internal error: {0}")]
    Internal(String),
}

impl EngineError {
    /// Shorthand for [`EngineError::Unsupported`].
    pub fn unsupported(feature: impl Into<String>, detail: impl Into<String>) -> Self {
        EngineError::Unsupported {
            feature: feature.into(),
            detail: detail.into(),
        }
    }

    /// Shorthand for [`EngineError::Format`] with a decoder error as its source.
    pub fn format(
        path: impl Into<String>,
        detail: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        EngineError::Format {
            path: path.into(),
            detail: detail.into(),
            source: Some(source.into()),
        }
    }

    /// Shorthand for [`EngineError::Io`].
    pub fn io(path: impl Into<String>, source: impl Into<BoxError>) -> Self {
        EngineError::Io {
            path: path.into(),
            source: source.into(),
        }
    }

    /// Whether this is a failure of the device a query ran on, one that running the
    /// query again on the CPU avoids: a driver or device call that failed
    /// ([`EngineError::Device`]: a launch, a copy, a sticky kernel fault), a kernel
    /// that did not compile ([`EngineError::KernelCompile`]), or device memory that ran
    /// out ([`EngineError::OutOfMemory`] on [`MemoryTier::Device`]), also when it
    /// travels wrapped in a DataFusion error ([`Self::is_device_failure_in`]).
    ///
    /// Not a device failure: [`EngineError::Unsupported`] (a path the engine refuses
    /// wherever it runs), [`EngineError::BackendUnavailable`] (a configuration the
    /// session was refused before anything ran), and host or disk out-of-memory (the
    /// CPU needs that memory too).
    pub fn is_device_failure(&self) -> bool {
        device_failure_in(self)
    }

    /// [`Self::is_device_failure`] for an error still in DataFusion's hands (a query
    /// stream's item): looks through `Context`, `Shared`, `Diagnostic`, `External`,
    /// Arrow's `ExternalError` and every member of a `Collection`, and recognises device
    /// out-of-memory after it became `ResourcesExhausted`.
    pub fn is_device_failure_in(err: &DataFusionError) -> bool {
        device_failure_in(err)
    }
}

/// How device out-of-memory's text begins once `From<EngineError> for DataFusionError`
/// has turned it into `ResourcesExhausted` (the `Display` of
/// [`EngineError::OutOfMemory`] on the device tier).
const DEVICE_OUT_OF_MEMORY_PREFIX: &str = "out of device memory";

/// Walks `err` and its sources for a device failure (see
/// [`EngineError::is_device_failure`]). The first `EngineError` on a path decides that
/// path: an I/O error whose source mentions a device is still an I/O error.
fn device_failure_in(err: &(dyn StdError + 'static)) -> bool {
    let mut pending = vec![err];
    while let Some(err) = pending.pop() {
        if let Some(engine) = err.downcast_ref::<EngineError>() {
            match engine {
                EngineError::Device { .. } | EngineError::KernelCompile { .. } => return true,
                EngineError::OutOfMemory { tier, .. } if *tier == MemoryTier::Device => {
                    return true;
                }
                // `#[error(transparent)]`: their `source()` skips the wrapped error itself.
                EngineError::DataFusion(inner) => pending.push(inner),
                EngineError::Arrow(inner) => pending.push(inner),
                _ => {}
            }
            continue;
        }
        if let Some(df) = err.downcast_ref::<DataFusionError>() {
            match df {
                DataFusionError::ResourcesExhausted(text)
                    if text.starts_with(DEVICE_OUT_OF_MEMORY_PREFIX) =>
                {
                    return true;
                }
                // `source()` names only the first member of a collection.
                DataFusionError::Collection(errs) => {
                    pending.extend(errs.iter().map(|e| e as &(dyn StdError + 'static)));
                    continue;
                }
                _ => {}
            }
        }
        // An `Arc<DataFusionError>` boxed as an external error: its `source()` skips it.
        if let Some(shared) = err.downcast_ref::<std::sync::Arc<DataFusionError>>() {
            pending.push(shared.as_ref());
            continue;
        }
        pending.extend(err.source());
    }
    false
}

impl From<EngineError> for DataFusionError {
    fn from(err: EngineError) -> Self {
        match err {
            EngineError::DataFusion(inner) => inner,
            EngineError::Arrow(inner) => DataFusionError::ArrowError(Box::new(inner), None),
            oom @ EngineError::OutOfMemory { .. } => {
                DataFusionError::ResourcesExhausted(oom.to_string())
            }
            other => DataFusionError::External(Box::new(other)),
        }
    }
}

impl From<DataFusionError> for EngineError {
    fn from(err: DataFusionError) -> Self {
        match err {
            DataFusionError::External(boxed) => match boxed.downcast::<EngineError>() {
                Ok(engine) => *engine,
                Err(other) => EngineError::DataFusion(DataFusionError::External(other)),
            },
            // DataFusion wraps errors in context and shares them between partitions;
            // look through both so an EngineError raised in an operator comes back out.
            DataFusionError::Context(ctx, inner) => match EngineError::from(*inner) {
                EngineError::DataFusion(inner) => {
                    EngineError::DataFusion(DataFusionError::Context(ctx, Box::new(inner)))
                }
                engine => engine,
            },
            DataFusionError::ArrowError(inner, None) => EngineError::Arrow(*inner),
            // A shared error (one a failed build hands every partition): unwrapped when
            // this is its last holder; otherwise kept shared, its class unchanged.
            DataFusionError::Shared(shared) => match std::sync::Arc::try_unwrap(shared) {
                Ok(inner) => EngineError::from(inner),
                Err(shared) => EngineError::DataFusion(DataFusionError::Shared(shared)),
            },
            other => EngineError::DataFusion(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_error_survives_a_round_trip_through_datafusion() {
        let original = EngineError::Format {
            path: "spill/1.arrow".into(),
            detail: "truncated".into(),
            source: None,
        };
        let df: DataFusionError = original.into();
        assert!(matches!(df, DataFusionError::External(_)));
        match EngineError::from(df) {
            EngineError::Format { path, detail, .. } => {
                assert_eq!(path, "spill/1.arrow");
                assert_eq!(detail, "truncated");
            }
            other => panic!("expected Format, got {other:?}"),
        }
    }

    #[test]
    fn engine_error_is_found_under_datafusion_context() {
        let df = DataFusionError::Context(
            "while executing GpuFilterExec".into(),
            Box::new(EngineError::unsupported("x", "y").into()),
        );
        assert!(matches!(
            EngineError::from(df),
            EngineError::Unsupported { .. }
        ));
    }

    #[test]
    fn out_of_memory_becomes_resources_exhausted_so_datafusion_spills() {
        let df: DataFusionError = EngineError::OutOfMemory {
            tier: MemoryTier::Device,
            requested_bytes: 10,
            available_bytes: 1,
        }
        .into();
        match df {
            DataFusionError::ResourcesExhausted(msg) => assert!(msg.contains("device")),
            other => panic!("expected ResourcesExhausted, got {other:?}"),
        }
    }

    #[test]
    fn foreign_datafusion_errors_are_kept_as_they_are() {
        let err = EngineError::from(DataFusionError::Plan("no table t".into()));
        assert!(matches!(
            err,
            EngineError::DataFusion(DataFusionError::Plan(_))
        ));
    }

    fn device_call_failure() -> EngineError {
        EngineError::Device {
            device: DeviceId::new(BackendKind::Cuda, 0),
            operation: "cuLaunchKernel".into(),
            detail: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
        }
    }

    fn out_of(tier: MemoryTier) -> EngineError {
        EngineError::OutOfMemory {
            tier,
            requested_bytes: 10,
            available_bytes: 1,
        }
    }

    #[test]
    fn failed_device_calls_and_kernel_compiles_are_device_failures() {
        assert!(device_call_failure().is_device_failure());
        let compile = EngineError::KernelCompile {
            kernel: "hash_join.cu".into(),
            arch: "compute_90".into(),
            log: "error: expected a ;".into(),
        };
        assert!(compile.is_device_failure());
    }

    #[test]
    fn only_device_memory_running_out_is_a_device_failure() {
        assert!(out_of(MemoryTier::Device).is_device_failure());
        assert!(!out_of(MemoryTier::Host).is_device_failure());
        assert!(!out_of(MemoryTier::Disk).is_device_failure());
    }

    #[test]
    fn refusals_and_host_errors_are_not_device_failures() {
        let refusals = [
            EngineError::unsupported("hash join on Utf8", "stays on CPU"),
            EngineError::BackendUnavailable {
                requested: BackendKind::Cuda,
                reason: "built without the `cuda` feature".into(),
            },
            EngineError::Internal("broken invariant".into()),
            EngineError::io("t.parquet", std::io::Error::other("device busy")),
        ];
        for err in refusals {
            assert!(!err.is_device_failure(), "{err}");
        }
    }

    #[test]
    fn device_out_of_memory_is_recognised_after_becoming_resources_exhausted() {
        assert!(
            out_of(MemoryTier::Device)
                .to_string()
                .starts_with(DEVICE_OUT_OF_MEMORY_PREFIX)
        );
        let device: DataFusionError = out_of(MemoryTier::Device).into();
        let host: DataFusionError = out_of(MemoryTier::Host).into();
        assert!(EngineError::is_device_failure_in(&device));
        assert!(!EngineError::is_device_failure_in(&host));
        // DataFusion's own memory pool refusing host memory.
        let pool = DataFusionError::ResourcesExhausted(
            "Failed to allocate additional 10.0 MB for HashJoinInput".into(),
        );
        assert!(!EngineError::is_device_failure_in(&pool));
    }

    #[test]
    fn a_device_failure_is_found_under_context_shared_arrow_and_external_wrappers() {
        let arrow =
            ArrowError::ExternalError(Box::new(DataFusionError::from(device_call_failure())));
        let wrapped = DataFusionError::Context(
            "while executing GpuHashJoinExec".into(),
            Box::new(DataFusionError::Shared(std::sync::Arc::new(
                DataFusionError::ArrowError(Box::new(arrow), None),
            ))),
        );
        assert!(EngineError::is_device_failure_in(&wrapped));
        assert!(EngineError::DataFusion(wrapped).is_device_failure());

        let shared_external = DataFusionError::External(Box::new(std::sync::Arc::new(
            DataFusionError::from(out_of(MemoryTier::Device)),
        )));
        assert!(EngineError::is_device_failure_in(&shared_external));
    }

    #[test]
    fn a_device_failure_anywhere_in_a_collection_counts() {
        let errors = DataFusionError::Collection(vec![
            DataFusionError::Plan("first".into()),
            device_call_failure().into(),
        ]);
        assert!(EngineError::is_device_failure_in(&errors));
    }

    #[test]
    fn errors_without_a_device_failure_inside_are_not_device_failures() {
        let plain = [
            DataFusionError::Execution("Divide by zero error".into()),
            DataFusionError::Context(
                "while executing GpuFilterExec".into(),
                Box::new(EngineError::unsupported("x", "y").into()),
            ),
            DataFusionError::Collection(vec![DataFusionError::Plan("no table t".into())]),
            DataFusionError::ArrowError(
                Box::new(ArrowError::ComputeError("overflow".into())),
                None,
            ),
        ];
        for err in plain {
            assert!(!EngineError::is_device_failure_in(&err), "{err}");
        }
    }

    #[test]
    fn unsupported_message_names_feature_and_detail() {
        let msg = EngineError::unsupported("hash join on Utf8", "stays on CPU").to_string();
        assert_eq!(msg, "unsupported: hash join on Utf8: stays on CPU");
    }
}
