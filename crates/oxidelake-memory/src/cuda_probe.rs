//! Probing for a usable CUDA driver without panicking.
//!
//! cudarc in dynamic-loading mode panics on the first driver call when `libcuda` cannot
//! be loaded, and keeps panicking afterwards. Everything in OxideLake that might touch the
//! driver therefore asks this module first; it only `dlopen`s the library and, if that
//! works, counts devices behind `catch_unwind` (an old driver missing a symbol also
//! panics inside cudarc).
//!
//! The probe lives in the memory crate because pinned allocation is the lowest layer that
//! needs the driver; `oxidelake-device` reuses it instead of probing a second way.

/// Whether CUDA can be used in this process, and if not, why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CudaAvailability {
    /// A driver is loaded and reports at least one device.
    Available {
        /// Number of CUDA devices the driver reports.
        devices: usize,
    },
    /// CUDA cannot be used; the reason is meant for users and logs.
    Unavailable {
        /// Why not, e.g. "libcuda could not be loaded (no NVIDIA driver)".
        reason: String,
    },
}

impl CudaAvailability {
    /// Number of usable devices (0 when unavailable).
    pub fn devices(&self) -> usize {
        match self {
            CudaAvailability::Available { devices } => *devices,
            CudaAvailability::Unavailable { .. } => 0,
        }
    }
}

/// Probes the CUDA driver. Never panics; cheap enough to call at startup.
#[cfg(feature = "cuda")]
pub fn probe() -> CudaAvailability {
    // SAFETY: `is_culib_present` only dlopen()s the candidate library names and closes
    // the handle again; it calls no driver function.
    #[allow(unsafe_code)]
    let present = unsafe { cudarc::driver::sys::is_culib_present() };
    if !present {
        return CudaAvailability::Unavailable {
            reason: "libcuda could not be loaded (no NVIDIA driver on this machine)".into(),
        };
    }
    match std::panic::catch_unwind(cudarc::driver::CudaContext::device_count) {
        Ok(Ok(n)) if n > 0 => CudaAvailability::Available {
            devices: usize::try_from(n).unwrap_or(0),
        },
        Ok(Ok(_)) => CudaAvailability::Unavailable {
            reason: "the CUDA driver reports no devices".into(),
        },
        Ok(Err(e)) => CudaAvailability::Unavailable {
            reason: format!("cuInit/cuDeviceGetCount failed: {e}"),
        },
        Err(_) => CudaAvailability::Unavailable {
            reason: "the CUDA driver is too old for this build (missing symbol)".into(),
        },
    }
}

/// Probes the CUDA driver. Without the `cuda` feature CUDA is never available.
#[cfg(not(feature = "cuda"))]
pub fn probe() -> CudaAvailability {
    CudaAvailability::Unavailable {
        reason: "built without the `cuda` feature".into(),
    }
}

/// Whether the NVRTC runtime compiler library can be loaded.
#[cfg(feature = "cuda")]
pub fn nvrtc_available() -> bool {
    // SAFETY: only dlopen()s candidate names of libnvrtc; no NVRTC function is called.
    #[allow(unsafe_code)]
    unsafe {
        cudarc::nvrtc::sys::is_culib_present()
    }
}

/// Whether the NVRTC runtime compiler library can be loaded (never, without `cuda`).
#[cfg(not(feature = "cuda"))]
pub fn nvrtc_available() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_without_a_driver_reports_a_reason_instead_of_panicking() {
        match probe() {
            CudaAvailability::Available { devices } => assert!(devices > 0),
            CudaAvailability::Unavailable { reason } => assert!(!reason.is_empty()),
        }
    }
}
