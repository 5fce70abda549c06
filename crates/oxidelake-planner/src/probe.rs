//! What a placement target means on this machine: `auto` asks a [`BackendProbe`].
//!
//! The target itself ([`PlacementTarget`], `oxidelake.placement.target`) is one of the
//! session options in `oxidelake-compute`; resolving it against the local hardware is a
//! planning question, so the probe stays here.

use std::fmt;

use oxidelake_core::BackendKind;

use crate::PlacementTarget;

/// What `auto` resolves to: the local hardware. The runtime implements it with the
/// hardware detector; tests use a fixed answer.
pub trait BackendProbe: Send + Sync + fmt::Debug {
    /// The best backend this machine has.
    fn local_backend(&self) -> BackendKind;

    /// The backend `target` means here; `Auto` asks [`Self::local_backend`]. `None` = no
    /// rewrites (the CPU was asked for, or `auto` found no GPU).
    fn resolve(&self, target: PlacementTarget) -> Option<BackendKind> {
        let kind = match target {
            PlacementTarget::Auto => self.local_backend(),
            PlacementTarget::Cpu => return None,
            PlacementTarget::Cuda => BackendKind::Cuda,
        };
        (kind == BackendKind::Cuda).then_some(kind)
    }
}

/// A probe with a fixed answer (tests, and cluster planning where `auto` means CPU).
#[derive(Debug, Clone, Copy)]
pub struct FixedProbe(pub BackendKind);

impl BackendProbe for FixedProbe {
    fn local_backend(&self) -> BackendKind {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_never_rewrites_and_auto_follows_the_probe() {
        let gpu = FixedProbe(BackendKind::Cuda);
        let cpu = FixedProbe(BackendKind::CpuSimd);
        assert_eq!(gpu.resolve(PlacementTarget::Cpu), None);
        assert_eq!(gpu.resolve(PlacementTarget::Auto), Some(BackendKind::Cuda));
        assert_eq!(cpu.resolve(PlacementTarget::Auto), None);
        assert_eq!(cpu.resolve(PlacementTarget::Cuda), Some(BackendKind::Cuda));
    }
}
