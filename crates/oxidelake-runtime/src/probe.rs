//! The local hardware as the planner sees it.

use oxidelake_core::BackendKind;
use oxidelake_device::HardwareDetector;
use oxidelake_planner::BackendProbe;

/// Fails with the typed startup error when `OXIDE_BACKEND` forces a backend this machine
/// cannot start ([`HardwareDetector::check_forced`]); `oxide sql` and the Python module's
/// embedded sessions call it first.
pub fn check_forced_backend() -> Result<(), oxidelake_core::EngineError> {
    HardwareDetector::check_forced()
}

/// Resolves `auto` with the process's shared backend (the hardware detector,
/// honouring `OXIDE_BACKEND`). A detector error (e.g. `OXIDE_BACKEND=cuda` without a device) means the
/// CPU here: the error itself is reported when an operator asks for its backend.
#[derive(Debug, Default, Clone, Copy)]
pub struct DetectorProbe;

impl BackendProbe for DetectorProbe {
    fn local_backend(&self) -> BackendKind {
        HardwareDetector::shared()
            .map(|b| b.kind())
            .unwrap_or(BackendKind::CpuSimd)
    }
}
