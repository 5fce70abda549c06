//! Opaque RAII handles for device memory, transfer buffers and streams.
//!
//! Each handle owns a backend-tagged resource and releases it exactly once when dropped
//! (an `AlignedBuf`'s deallocation, `cuMemFree`, `cuMemFreeHost`, `cuStreamDestroy`, all
//! done by the owning types' own `Drop`). The variants are private: code outside this
//! crate can only pass handles back to the backend that made them.

use oxidelake_core::{DeviceId, EngineError};
use oxidelake_memory::{AlignedBuf, HostMemory, MemoryClass};

pub(crate) enum DeviceMem {
    /// CPU backend: device memory is 128-byte-aligned host memory.
    Host(AlignedBuf),
    /// CUDA backend: a device allocation (at least one byte, even for empty buffers).
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaSlice<u8>),
}

/// Memory on a device.
pub struct DeviceBuffer {
    pub(crate) device: DeviceId,
    pub(crate) len_bytes: usize,
    pub(crate) address: usize,
    pub(crate) mem: DeviceMem,
}

impl DeviceBuffer {
    /// The device that owns the memory.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// The buffer's address in the device's address space (for alignment checks and
    /// diagnostics; it cannot be dereferenced from safe code).
    pub fn address(&self) -> usize {
        self.address
    }
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("device", &self.device)
            .field("len_bytes", &self.len_bytes)
            .finish()
    }
}

/// Host memory used as the source or destination of device copies. A pinned buffer's
/// bytes count in the telemetry hub's pinned gauge from its creation to its drop.
pub struct HostBuffer {
    pub(crate) device: DeviceId,
    pub(crate) mem: HostMemory,
}

impl HostBuffer {
    /// A buffer of `device`'s backend over `mem`, counted in the pinned gauge if pinned.
    pub(crate) fn new(device: DeviceId, mem: HostMemory) -> Self {
        let buffer = Self { device, mem };
        buffer.count_pinned(1);
        buffer
    }

    fn count_pinned(&self, sign: i64) {
        if self.memory_class() == MemoryClass::Pinned {
            let bytes = i64::try_from(self.len()).unwrap_or(i64::MAX);
            oxidelake_core::TelemetryHub::global().add_pinned_bytes(sign * bytes);
        }
    }

    /// The device whose backend allocated this buffer.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.mem.len()
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.mem.is_empty()
    }

    /// Pinned (page-locked, DMA-able) or pageable.
    pub fn memory_class(&self) -> MemoryClass {
        self.mem.memory_class()
    }

    /// The bytes; waits for copies still writing into a pinned buffer.
    pub fn as_slice(&self) -> Result<&[u8], EngineError> {
        Ok(self.mem.as_slice()?)
    }

    /// The bytes, mutably; waits for copies still writing into a pinned buffer.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8], EngineError> {
        Ok(self.mem.as_mut_slice()?)
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        self.count_pinned(-1);
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("device", &self.device)
            .field("mem", &self.mem)
            .finish()
    }
}

pub(crate) enum StreamInner {
    /// CPU backend: work runs synchronously on the calling thread.
    Cpu,
    #[cfg(feature = "cuda")]
    Cuda(std::sync::Arc<cudarc::driver::CudaStream>),
}

/// An in-order queue of copies and kernels on one device.
pub struct DeviceStream {
    pub(crate) device: DeviceId,
    pub(crate) inner: StreamInner,
}

impl DeviceStream {
    /// The device the stream belongs to.
    pub fn device(&self) -> DeviceId {
        self.device
    }
}

impl std::fmt::Debug for DeviceStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceStream")
            .field("device", &self.device)
            .finish()
    }
}

/// The error for a handle passed to a backend that did not create it.
pub(crate) fn foreign_handle(expected: DeviceId, found: DeviceId, what: &str) -> EngineError {
    EngineError::InvalidArgument {
        what: "device handle",
        detail: format!("{what} belongs to {found}, but this backend drives {expected}"),
    }
}

/// A hash table over the build side of a join, owned by the backend that built it.
///
/// The table itself is the backend's own type, held opaquely: the handle names no backend
/// type (so this module imports no backend), and the backend takes its table back by
/// type and device ([`JoinTable::table_on`]).
pub struct JoinTable {
    device: DeviceId,
    build_rows: usize,
    allocated_bytes: usize,
    table: Box<dyn std::any::Any + Send + Sync>,
}

impl JoinTable {
    /// `table`, built on `device` over `build_rows` rows, holding `allocated_bytes`.
    pub(crate) fn new<T: std::any::Any + Send + Sync>(
        device: DeviceId,
        build_rows: usize,
        allocated_bytes: usize,
        table: T,
    ) -> Self {
        Self {
            device,
            build_rows,
            allocated_bytes,
            table: Box::new(table),
        }
    }

    /// The backend's table, when `device` built it as a `T`; a foreign handle otherwise.
    pub(crate) fn table_on<T: std::any::Any>(&self, device: DeviceId) -> Result<&T, EngineError> {
        match self.table.downcast_ref::<T>() {
            Some(table) if self.device == device => Ok(table),
            _ => Err(foreign_handle(device, self.device, "join table")),
        }
    }

    /// The device holding the table.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// Number of build-side rows indexed (including rows with NULL keys, which never match).
    pub fn build_rows(&self) -> usize {
        self.build_rows
    }

    /// Memory held by the table, in bytes.
    pub fn allocated_bytes(&self) -> usize {
        self.allocated_bytes
    }
}

impl std::fmt::Debug for JoinTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinTable")
            .field("device", &self.device)
            .field("build_rows", &self.build_rows)
            .finish()
    }
}
