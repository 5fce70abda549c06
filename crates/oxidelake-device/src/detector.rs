//! `HardwareDetector`: which backend this process uses.

use std::sync::{Arc, OnceLock};

use oxidelake_core::{BackendKind, EngineError};

use crate::{CpuBackend, GpuBackend};

/// Picks the backend at startup.
///
/// With `OXIDE_BACKEND` unset it takes CUDA where a driver reports a usable device, the
/// CPU otherwise. Setting `OXIDE_BACKEND=cpu|cuda` forces one; if the
/// forced backend cannot be used the result is [`EngineError::BackendUnavailable`] with
/// the reason: a user who asked for a GPU must not silently get the CPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HardwareDetector {
    requested: Option<BackendKind>,
}

impl HardwareDetector {
    /// The environment variable that forces a backend.
    pub const ENV_VAR: &'static str = "OXIDE_BACKEND";

    /// A detector that auto-detects (`None`) or forces `requested`.
    pub fn new(requested: Option<BackendKind>) -> Self {
        Self { requested }
    }

    /// A detector configured from a value of `OXIDE_BACKEND` (`None` or empty = auto).
    pub fn from_setting(value: Option<&str>) -> Result<Self, EngineError> {
        match value.map(str::trim).filter(|v| !v.is_empty()) {
            None => Ok(Self::new(None)),
            Some(v) => v
                .parse::<BackendKind>()
                .map(|kind| Self::new(Some(kind)))
                .map_err(|e| EngineError::InvalidArgument {
                    what: "OXIDE_BACKEND",
                    detail: e.to_string(),
                }),
        }
    }

    /// A detector configured from the process environment.
    pub fn from_env() -> Result<Self, EngineError> {
        Self::from_setting(std::env::var(Self::ENV_VAR).ok().as_deref())
    }

    /// The backend that was forced, if any.
    pub fn requested(&self) -> Option<BackendKind> {
        self.requested
    }

    /// Reads `OXIDE_BACKEND` and returns the backend to use.
    pub fn select() -> Result<Arc<dyn GpuBackend>, EngineError> {
        Self::from_env()?.backend()
    }

    /// The backend [`HardwareDetector::select`] chooses, created once per process and
    /// shared by every operator and session. Creating a backend opens a device context,
    /// and kernels compile on a backend's first use of them, so this must not happen per
    /// operator execution. A selection that fails is not cached (it costs nothing).
    pub fn shared() -> Result<Arc<dyn GpuBackend>, EngineError> {
        static SHARED: OnceLock<Arc<dyn GpuBackend>> = OnceLock::new();
        if let Some(backend) = SHARED.get() {
            return Ok(Arc::clone(backend));
        }
        let backend = Self::select()?;
        Ok(Arc::clone(SHARED.get_or_init(|| backend)))
    }

    /// Fails with the typed startup error when `OXIDE_BACKEND` forces a backend this
    /// machine cannot start (or names none); nothing when it is unset or empty. Embedded
    /// sessions ask before they run anything: a forced backend that is missing is the
    /// user's mistake to hear about at once, not a fallback to the CPU found in a log.
    /// (The operators themselves fall back per execution, for clusters whose executors
    /// differ.)
    pub fn check_forced() -> Result<(), EngineError> {
        if Self::from_env()?.requested().is_some() {
            Self::shared()?;
        }
        Ok(())
    }

    /// The backend this detector chooses on this machine.
    pub fn backend(&self) -> Result<Arc<dyn GpuBackend>, EngineError> {
        match self.requested {
            Some(BackendKind::CpuSimd) => Ok(Arc::new(CpuBackend::new())),
            Some(BackendKind::Cuda) => cuda_backend(),
            None => match cuda_backend() {
                Ok(backend) => Ok(backend),
                Err(e) => {
                    // A CUDA device that cannot be used (no NVRTC, no context) is worth a
                    // warning; a machine without one is the normal case, said once per
                    // selection (the shared backend is chosen once per process), so a
                    // build with `cuda` on a machine without a driver says so rather
                    // than silently.
                    if crate::probe_cuda().devices() > 0 {
                        tracing::warn!(reason = %e, "GPU present but not used; using the CPU")
                    } else {
                        tracing::info!(reason = %e, "using the CPU backend")
                    }
                    Ok(Arc::new(CpuBackend::new()))
                }
            },
        }
    }
}

#[cfg(feature = "cuda")]
fn cuda_backend() -> Result<Arc<dyn GpuBackend>, EngineError> {
    Ok(Arc::new(crate::CudaBackend::try_new(0)?))
}

#[cfg(not(feature = "cuda"))]
fn cuda_backend() -> Result<Arc<dyn GpuBackend>, EngineError> {
    Err(EngineError::BackendUnavailable {
        requested: BackendKind::Cuda,
        reason: "this build does not include the `cuda` feature".into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_detection_yields_the_cpu_backend_on_a_machine_without_a_gpu() {
        if crate::probe_cuda().devices() > 0 {
            eprintln!("skipping: a CUDA device is present");
            return;
        }
        let backend = HardwareDetector::from_setting(None)
            .unwrap()
            .backend()
            .unwrap();
        assert_eq!(backend.kind(), BackendKind::CpuSimd);
    }

    #[test]
    fn forcing_cpu_always_yields_the_cpu_backend() {
        let backend = HardwareDetector::from_setting(Some("cpu"))
            .unwrap()
            .backend()
            .unwrap();
        assert_eq!(backend.kind(), BackendKind::CpuSimd);
    }

    #[test]
    fn forcing_cuda_without_a_device_is_a_typed_startup_error() {
        if crate::probe_cuda().devices() > 0 {
            eprintln!("skipping: a CUDA device is present");
            return;
        }
        let detector = HardwareDetector::from_setting(Some("cuda")).unwrap();
        assert_eq!(detector.requested(), Some(BackendKind::Cuda));
        match detector.backend() {
            Err(EngineError::BackendUnavailable { requested, reason }) => {
                assert_eq!(requested, BackendKind::Cuda);
                assert!(!reason.is_empty());
            }
            other => panic!("expected BackendUnavailable, got {other:?}"),
        }
    }

    /// Run by scripts/test-cuda-emulated.sh with the emulated driver on the loader path
    /// and libnvrtc deliberately off it (`OXIDE_EXPECT_NO_NVRTC=1`).
    #[test]
    #[ignore = "needs a CUDA driver (or the emulated one) and no libnvrtc: scripts/test-cuda-emulated.sh"]
    fn a_gpu_without_nvrtc_is_refused_with_the_reason_and_auto_detection_picks_the_cpu() {
        if std::env::var_os("OXIDE_EXPECT_NO_NVRTC").is_none() {
            eprintln!("skipping: set OXIDE_EXPECT_NO_NVRTC=1 with libnvrtc off the loader path");
            return;
        }
        assert!(
            crate::probe_cuda().devices() > 0,
            "no (emulated) CUDA device"
        );
        assert!(!crate::nvrtc_available(), "libnvrtc is loadable");
        match HardwareDetector::from_setting(Some("cuda"))
            .unwrap()
            .backend()
        {
            Err(EngineError::BackendUnavailable { requested, reason }) => {
                assert_eq!(requested, BackendKind::Cuda);
                assert!(reason.contains("libnvrtc"), "{reason}");
            }
            other => panic!(
                "expected BackendUnavailable, got {:?}",
                other.map(|b| b.kind())
            ),
        }
        let auto = HardwareDetector::from_setting(None)
            .unwrap()
            .backend()
            .unwrap();
        assert_eq!(auto.kind(), BackendKind::CpuSimd);
    }

    #[test]
    fn an_unknown_backend_name_is_rejected_with_the_valid_choices() {
        match HardwareDetector::from_setting(Some("tpu")) {
            Err(EngineError::InvalidArgument { what, detail }) => {
                assert_eq!(what, "OXIDE_BACKEND");
                assert!(detail.ends_with("expected one of cpu, cuda"), "{detail}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        assert_eq!(
            HardwareDetector::from_setting(Some("  "))
                .unwrap()
                .requested(),
            None
        );
    }
}
