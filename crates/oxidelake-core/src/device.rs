//! Names for backends, devices and memory tiers.

use std::fmt;
use std::str::FromStr;

/// The kind of hardware backend an operator runs on.
///
/// `CpuSimd` is always available and is the semantic reference; `Cuda` is an opt-in
/// feature that must match it exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum BackendKind {
    /// Arrow compute kernels plus rayon on the host CPU.
    CpuSimd,
    /// NVIDIA GPUs through the CUDA driver API (feature `cuda`).
    Cuda,
}

impl BackendKind {
    /// The short lower-case tag used in EXPLAIN output and in `OXIDE_BACKEND`.
    pub fn tag(self) -> &'static str {
        match self {
            BackendKind::CpuSimd => "cpu",
            BackendKind::Cuda => "cuda",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tag())
    }
}

/// A backend name that is not one of `cpu` or `cuda`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend {value:?}: expected one of cpu, cuda")]
pub struct ParseBackendKindError {
    /// The text that failed to parse.
    pub value: String,
}

impl FromStr for BackendKind {
    type Err = ParseBackendKindError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" | "cpusimd" | "cpu-simd" => Ok(BackendKind::CpuSimd),
            "cuda" => Ok(BackendKind::Cuda),
            _ => Err(ParseBackendKindError {
                value: s.to_string(),
            }),
        }
    }
}

/// One concrete device: a backend kind plus the ordinal the driver gives it.
///
/// The CPU is always `DeviceId { kind: CpuSimd, ordinal: 0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// Which backend owns the device.
    pub kind: BackendKind,
    /// The driver's ordinal for the device (0 for the CPU).
    pub ordinal: u32,
}

impl DeviceId {
    /// The host CPU.
    pub const CPU: DeviceId = DeviceId {
        kind: BackendKind::CpuSimd,
        ordinal: 0,
    };

    /// A device of `kind` with the driver ordinal `ordinal`.
    pub fn new(kind: BackendKind, ordinal: u32) -> Self {
        Self { kind, ordinal }
    }
}

impl fmt::Display for DeviceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.ordinal)
    }
}

/// The three tiers the spill manager moves batches between, hottest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemoryTier {
    /// Device memory (VRAM); empty on machines without a GPU.
    Device,
    /// Host RAM (pinned where a CUDA driver exists, pageable otherwise).
    Host,
    /// Arrow IPC files in the local spill directory.
    Disk,
}

impl MemoryTier {
    /// The next colder tier, or `None` for disk.
    pub fn colder(self) -> Option<MemoryTier> {
        match self {
            MemoryTier::Device => Some(MemoryTier::Host),
            MemoryTier::Host => Some(MemoryTier::Disk),
            MemoryTier::Disk => None,
        }
    }
}

impl fmt::Display for MemoryTier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            MemoryTier::Device => "device",
            MemoryTier::Host => "host",
            MemoryTier::Disk => "disk",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_parse_case_insensitively_and_round_trip_through_display() {
        for kind in [BackendKind::CpuSimd, BackendKind::Cuda] {
            assert_eq!(kind.tag().parse::<BackendKind>(), Ok(kind));
            assert_eq!(
                kind.to_string().to_uppercase().parse::<BackendKind>(),
                Ok(kind)
            );
        }
    }

    #[test]
    fn unknown_backend_name_is_a_typed_parse_error() {
        let err = "tpu".parse::<BackendKind>().unwrap_err();
        assert_eq!(err.value, "tpu");
        assert!(err.to_string().ends_with("expected one of cpu, cuda"));
    }

    #[test]
    fn memory_tiers_get_colder_until_disk() {
        assert_eq!(MemoryTier::Device.colder(), Some(MemoryTier::Host));
        assert_eq!(MemoryTier::Host.colder(), Some(MemoryTier::Disk));
        assert_eq!(MemoryTier::Disk.colder(), None);
    }
}
