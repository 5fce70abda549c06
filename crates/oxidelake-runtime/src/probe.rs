//! The local hardware as the planner sees it.

use std::sync::OnceLock;

use oxidelake_core::BackendKind;
use oxidelake_device::HardwareDetector;
use oxidelake_planner::BackendProbe;

/// Resolves `auto` with the hardware detector (honouring `OXIDE_BACKEND`), once per
/// process. A detector error (e.g. `OXIDE_BACKEND=cuda` without a device) means the
/// CPU here: the error itself is reported when an operator asks for its backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct DetectorProbe;

impl BackendProbe for DetectorProbe {
    fn local_backend(&self) -> BackendKind {
        static DETECTED: OnceLock<BackendKind> = OnceLock::new();
        *DETECTED.get_or_init(|| {
            HardwareDetector::from_env()
                .and_then(|d| d.backend())
                .map(|b| b.kind())
                .unwrap_or(BackendKind::CpuSimd)
        })
    }
}
