//! Host memory for transfers: pinned where the CUDA driver allows it, pageable otherwise.
//!
//! Page-locked (pinned) memory lets the GPU's DMA engines copy without a staging copy and
//! lets copies overlap kernels. It is a scarce, driver-managed resource, so the allocator
//! falls back to 64-byte-aligned pageable memory when there is no driver or the driver
//! refuses; the class actually obtained is recorded on every buffer ([`MemoryClass`]) so
//! tests and the dashboard can report it instead of guessing.

use crate::{AlignedBuf, MemoryError};

/// Which kind of host memory a buffer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryClass {
    /// Page-locked through the CUDA driver (`cuMemHostAlloc`); DMA-able.
    Pinned,
    /// Ordinary pageable memory from the global allocator, 64-byte aligned.
    Pageable,
}

enum Inner {
    Pageable(AlignedBuf),
    #[cfg(feature = "cuda")]
    Pinned(cudarc::driver::PinnedHostSlice<u8>),
}

/// A host buffer from a [`HostAllocator`]; released exactly once on drop.
pub struct HostMemory {
    inner: Inner,
    len_bytes: usize,
}

impl HostMemory {
    /// Wraps an existing pageable buffer.
    pub fn from_pageable(buf: AlignedBuf) -> Self {
        let len_bytes = buf.len();
        Self {
            inner: Inner::Pageable(buf),
            len_bytes,
        }
    }

    /// Which kind of memory this is.
    pub fn memory_class(&self) -> MemoryClass {
        match &self.inner {
            Inner::Pageable(_) => MemoryClass::Pageable,
            #[cfg(feature = "cuda")]
            Inner::Pinned(_) => MemoryClass::Pinned,
        }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// The bytes. For pinned memory this first waits for in-flight copies into it.
    pub fn as_slice(&self) -> Result<&[u8], MemoryError> {
        match &self.inner {
            Inner::Pageable(buf) => Ok(buf.as_slice()),
            #[cfg(feature = "cuda")]
            Inner::Pinned(p) => {
                p.as_slice()
                    .map(|s| &s[..self.len_bytes])
                    .map_err(|e| MemoryError::Driver {
                        operation: "synchronize pinned buffer",
                        detail: e.to_string(),
                    })
            }
        }
    }

    /// The bytes, mutably. For pinned memory this first waits for in-flight copies.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], MemoryError> {
        match &mut self.inner {
            Inner::Pageable(buf) => Ok(buf.as_mut_slice()),
            #[cfg(feature = "cuda")]
            Inner::Pinned(p) => {
                let len = self.len_bytes;
                p.as_mut_slice()
                    .map(|s| &mut s[..len])
                    .map_err(|e| MemoryError::Driver {
                        operation: "synchronize pinned buffer",
                        detail: e.to_string(),
                    })
            }
        }
    }

    /// The pinned allocation, for the CUDA backend's asynchronous copies.
    #[cfg(feature = "cuda")]
    pub fn pinned_mut(&mut self) -> Option<&mut cudarc::driver::PinnedHostSlice<u8>> {
        match &mut self.inner {
            Inner::Pinned(p) => Some(p),
            Inner::Pageable(_) => None,
        }
    }

    /// The pinned allocation, for the CUDA backend's asynchronous copies.
    #[cfg(feature = "cuda")]
    pub fn pinned(&self) -> Option<&cudarc::driver::PinnedHostSlice<u8>> {
        match &self.inner {
            Inner::Pinned(p) => Some(p),
            Inner::Pageable(_) => None,
        }
    }
}

impl std::fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMemory")
            .field("len_bytes", &self.len_bytes)
            .field("class", &self.memory_class())
            .finish()
    }
}

#[derive(Clone)]
enum Mode {
    Pageable {
        reason: String,
    },
    #[cfg(feature = "cuda")]
    Pinned(std::sync::Arc<cudarc::driver::CudaContext>),
}

/// Allocates host buffers for device transfers, pinned when it can.
#[derive(Clone)]
pub struct HostAllocator {
    mode: Mode,
}

impl HostAllocator {
    /// An allocator that always returns pageable memory, with the reason recorded.
    pub fn pageable(reason: impl Into<String>) -> Self {
        Self {
            mode: Mode::Pageable {
                reason: reason.into(),
            },
        }
    }

    /// An allocator that pins memory through the given CUDA context.
    #[cfg(feature = "cuda")]
    pub fn pinned(ctx: std::sync::Arc<cudarc::driver::CudaContext>) -> Self {
        Self {
            mode: Mode::Pinned(ctx),
        }
    }

    /// Pinned through device 0 when the `cuda` feature is on and a driver with a device
    /// is present; pageable otherwise.
    pub fn detect() -> Self {
        match crate::cuda_probe::probe() {
            #[cfg(feature = "cuda")]
            crate::cuda_probe::CudaAvailability::Available { .. } => {
                match cudarc::driver::CudaContext::new(0) {
                    Ok(ctx) => Self::pinned(ctx),
                    Err(e) => Self::pageable(format!("creating a CUDA context failed: {e}")),
                }
            }
            #[cfg(not(feature = "cuda"))]
            crate::cuda_probe::CudaAvailability::Available { .. } => {
                Self::pageable("built without the `cuda` feature")
            }
            crate::cuda_probe::CudaAvailability::Unavailable { reason } => Self::pageable(reason),
        }
    }

    /// The class of memory this allocator hands out when nothing fails.
    pub fn memory_class(&self) -> MemoryClass {
        match &self.mode {
            Mode::Pageable { .. } => MemoryClass::Pageable,
            #[cfg(feature = "cuda")]
            Mode::Pinned(_) => MemoryClass::Pinned,
        }
    }

    /// Why memory is pageable, or `None` when the allocator pins.
    pub fn pageable_reason(&self) -> Option<&str> {
        match &self.mode {
            Mode::Pageable { reason } => Some(reason),
            #[cfg(feature = "cuda")]
            Mode::Pinned(_) => None,
        }
    }

    /// Allocates `len_bytes` of zeroed host memory. When pinning fails (the driver's
    /// page-locked limit), the buffer is pageable instead and says so.
    pub fn alloc(&self, len_bytes: usize) -> Result<HostMemory, MemoryError> {
        match &self.mode {
            Mode::Pageable { .. } => Ok(HostMemory::from_pageable(AlignedBuf::device_bound(
                len_bytes,
            )?)),
            #[cfg(feature = "cuda")]
            Mode::Pinned(ctx) => {
                // cuMemHostAlloc rejects zero bytes; the driver returns page-aligned
                // memory, so 128-byte alignment holds for every pinned buffer.
                let alloc_len = len_bytes.max(1);
                // SAFETY: flags 0 requests plain page-locked memory (not write-combined,
                // so host reads stay fast); the memory is zeroed below before anyone can
                // read it, which discharges the "memory is unset" precondition.
                #[allow(unsafe_code)]
                let pinned = unsafe { ctx.alloc_pinned_with_flags::<u8>(alloc_len, 0) };
                match pinned {
                    Ok(mut p) => {
                        if let Ok(bytes) = p.as_mut_slice() {
                            bytes.fill(0);
                        }
                        Ok(HostMemory {
                            inner: Inner::Pinned(p),
                            len_bytes,
                        })
                    }
                    Err(e) => {
                        tracing::warn!(len_bytes, error = %e, "pinned allocation failed; using pageable memory");
                        Ok(HostMemory::from_pageable(AlignedBuf::device_bound(
                            len_bytes,
                        )?))
                    }
                }
            }
        }
    }
}

impl std::fmt::Debug for HostAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostAllocator")
            .field("class", &self.memory_class())
            .field("pageable_reason", &self.pageable_reason())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda_probe::{CudaAvailability, probe};

    #[test]
    fn without_a_cuda_driver_host_memory_is_pageable_and_says_why() {
        if let CudaAvailability::Available { .. } = probe() {
            eprintln!(
                "skipping: a CUDA driver is present; see pinned_memory_is_used_when_a_driver_exists"
            );
            return;
        }
        let alloc = HostAllocator::detect();
        assert_eq!(alloc.memory_class(), MemoryClass::Pageable);
        assert!(alloc.pageable_reason().is_some_and(|r| !r.is_empty()));
        let buf = alloc.alloc(1000).unwrap();
        assert_eq!(buf.memory_class(), MemoryClass::Pageable);
        assert_eq!(buf.as_slice().unwrap().as_ptr() as usize % 128, 0);
        assert_eq!(buf.len(), 1000);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU and driver; run with --features cuda -- --ignored"]
    fn pinned_memory_is_used_when_a_driver_exists() {
        let alloc = HostAllocator::detect();
        assert_eq!(
            alloc.memory_class(),
            MemoryClass::Pinned,
            "reason: {:?}",
            alloc.pageable_reason()
        );
        let mut buf = alloc.alloc(4096).unwrap();
        assert_eq!(buf.memory_class(), MemoryClass::Pinned);
        buf.as_mut_slice().unwrap()[4095] = 9;
        assert_eq!(buf.as_slice().unwrap()[4095], 9);
        assert_eq!(buf.as_slice().unwrap().as_ptr() as usize % 128, 0);
    }
}
