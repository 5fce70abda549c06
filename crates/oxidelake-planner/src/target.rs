//! Where plans are placed: the `oxidelake.placement.target` setting and its resolution.

use std::fmt;
use std::str::FromStr;

use oxidelake_core::BackendKind;

/// The backend plans are placed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PlacementTarget {
    /// Whatever the local hardware detector finds (the default).
    #[default]
    Auto,
    /// No rewrites: every operator stays DataFusion's.
    Cpu,
    /// Place for NVIDIA GPUs. On a machine without one, the rewritten operators run their
    /// CPU paths, as a GPU-less executor of a heterogeneous cluster does.
    Cuda,
    /// Place for Apple GPUs (same fallback as `Cuda`).
    Metal,
}

impl PlacementTarget {
    /// The backend this target means here; `Auto` asks `probe`. `None` = no rewrites.
    pub fn resolve(self, probe: &dyn BackendProbe) -> Option<BackendKind> {
        let kind = match self {
            PlacementTarget::Auto => probe.local_backend(),
            PlacementTarget::Cpu => return None,
            PlacementTarget::Cuda => BackendKind::Cuda,
            PlacementTarget::Metal => BackendKind::Metal,
        };
        matches!(kind, BackendKind::Cuda | BackendKind::Metal).then_some(kind)
    }

    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PlacementTarget::Auto => "auto",
            PlacementTarget::Cpu => "cpu",
            PlacementTarget::Cuda => "cuda",
            PlacementTarget::Metal => "metal",
        }
    }
}

impl fmt::Display for PlacementTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PlacementTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "auto" => Ok(PlacementTarget::Auto),
            "cpu" => Ok(PlacementTarget::Cpu),
            "cuda" => Ok(PlacementTarget::Cuda),
            "metal" => Ok(PlacementTarget::Metal),
            other => Err(format!(
                "placement target {other:?} is not one of auto, cpu, cuda, metal"
            )),
        }
    }
}

/// What `auto` resolves to: the local hardware. The runtime implements it with the
/// hardware detector; tests use a fixed answer.
pub trait BackendProbe: Send + Sync + fmt::Debug {
    /// The best backend this machine has.
    fn local_backend(&self) -> BackendKind;
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
        assert_eq!(PlacementTarget::Cpu.resolve(&gpu), None);
        assert_eq!(PlacementTarget::Auto.resolve(&gpu), Some(BackendKind::Cuda));
        assert_eq!(PlacementTarget::Auto.resolve(&cpu), None);
        assert_eq!(PlacementTarget::Cuda.resolve(&cpu), Some(BackendKind::Cuda));
        assert_eq!("METAL".parse(), Ok(PlacementTarget::Metal));
        assert!("tpu".parse::<PlacementTarget>().is_err());
    }
}
