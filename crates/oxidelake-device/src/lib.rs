//! # oxidelake-device
//!
//! The hardware abstraction: two object-safe, synchronous traits, [`DeviceMemory`]
//! (allocations, copies, streams) and [`GpuBackend`] (the operators, over
//! [`DeviceBatch`]es; [`edge`] brings host batches to them), with opaque RAII handles ([`DeviceBuffer`], [`HostBuffer`], [`DeviceStream`]), and the
//! backends behind it:
//!
//! - [`CpuBackend`] — always present; "device" memory is 128-byte-aligned host memory and
//!   copies are `memcpy`. It is the semantic reference every GPU backend must match.
//! - `CudaBackend` (feature `cuda`) — cudarc's driver API, loaded dynamically so the
//!   feature builds and runs on machines without a driver; kernels are NVRTC-compiled on
//!   first use and cached per (kernel, device).
//!
//! [`HardwareDetector::select`] picks the backend at startup: `OXIDE_BACKEND=cpu|cuda`
//! forces one (an unavailable choice is a typed error, never a silent fallback); without
//! it, CUDA where a usable device is found, else the CPU. (Apple GPUs had a Metal backend
//! that was never compiled and ran no kernel; it was retired for a portable GPU backend,
//! ADR-0016.)
//!
//! **Allowed internal dependencies:** `oxidelake-core`, `oxidelake-memory` (spec §3).
//!
//! Why the trait has no associated types and no async methods: the backend is chosen at
//! runtime, so it must be usable as `Arc<dyn GpuBackend>`; asynchrony lives on device
//! streams and in the operators that bridge them into futures.
#![deny(unsafe_code)]
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

mod backend;
pub mod batching;
mod cpu;
#[cfg(feature = "cuda")]
mod cuda;
mod detector;
pub mod device_batch;
pub mod edge;
mod handles;
pub mod kernels;
#[cfg(feature = "cuda")]
pub mod nvrtc;
pub mod ops;
mod predicate;
pub mod strings;
mod value;

pub use backend::{DeviceMemory, GpuBackend, MemoryInfo};
pub use batching::BatchSizes;
pub use cpu::CpuBackend;
#[cfg(feature = "cuda")]
pub use cuda::CudaBackend;
pub use detector::HardwareDetector;
pub use device_batch::DeviceBatch;
pub use handles::{DeviceBuffer, DeviceStream, HostBuffer, JoinTable};
pub use oxidelake_memory::cuda_probe::{CudaAvailability, nvrtc_available, probe as probe_cuda};
