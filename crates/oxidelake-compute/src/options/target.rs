//! `oxidelake.placement.target`: the backend plans are placed for.
//!
//! This is the setting only: its values, how they are spelled and parsed. What `auto`
//! means on a machine is the planner's question (its `BackendProbe` resolves a target
//! to a backend), so the probe stays there and this type can live with the options the
//! operators read.

use std::fmt;
use std::str::FromStr;

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
}

impl PlacementTarget {
    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PlacementTarget::Auto => "auto",
            PlacementTarget::Cpu => "cpu",
            PlacementTarget::Cuda => "cuda",
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
            // Said apart, so a setting from before the Metal backend's retirement
            // (ADR-0016) is not answered as a typo.
            "metal" => Err("placement target \"metal\": this build has no Apple GPU \
                 backend (the Metal one was retired, ADR-0016); use auto, cpu or cuda"
                .into()),
            other => Err(format!(
                "placement target {other:?} is not one of auto, cpu, cuda"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_in_any_case_print_back_and_reject_unknown_names() {
        assert_eq!(" CUDA ".parse(), Ok(PlacementTarget::Cuda));
        assert!("tpu".parse::<PlacementTarget>().is_err());
        let metal = "metal".parse::<PlacementTarget>().unwrap_err();
        assert!(metal.contains("retired"), "{metal}");
        for target in [
            PlacementTarget::Auto,
            PlacementTarget::Cpu,
            PlacementTarget::Cuda,
        ] {
            assert_eq!(target.to_string().parse(), Ok(target));
        }
    }
}
