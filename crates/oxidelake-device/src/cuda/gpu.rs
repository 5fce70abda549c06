//! The CUDA device the backend drives, as every kernel launch needs it: the context, the
//! compiled modules and how to look a kernel up, the pools, and how a driver error
//! becomes an [`EngineError`]. The backend owns one; operators' launches borrow it
//! through [`Dev`], so no launch module reads the backend itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arrow::buffer::NullBuffer;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DeviceRepr, LaunchConfig,
    ValidAsZeroBits,
};
use oxidelake_core::{DeviceId, EngineError};

use crate::kernels::CudaKernel;

/// Threads per block; a multiple of the warp size, and `FP_BLOCK` in filter_project.cu.
pub(super) const BLOCK: u32 = 256;

/// One block of [`BLOCK`] threads: the single-block scans.
pub(super) fn one_block() -> LaunchConfig {
    LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

/// A 1-D grid of [`BLOCK`]-thread blocks covering `rows` rows.
pub(super) fn grid(rows: usize) -> LaunchConfig {
    let blocks = u32::try_from(rows.div_ceil(BLOCK as usize))
        .unwrap_or(u32::MAX)
        .max(1);
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

pub(super) fn unsupported(detail: impl Into<String>) -> EngineError {
    EngineError::unsupported("CUDA operator input", detail)
}

/// The launch context of one operator call: the device and the stream its copies and
/// kernels go on.
pub(super) struct Dev<'a> {
    pub(super) gpu: &'a Gpu,
    /// The backend through its trait, for the moves every backend makes alike
    /// (`device_batch::upload` / `download`).
    pub(super) backend: &'a dyn crate::GpuBackend,
    pub(super) stream: &'a Arc<CudaStream>,
}

impl Dev<'_> {
    pub(super) fn err(&self, op: &str) -> impl Fn(cudarc::driver::DriverError) -> EngineError + '_ {
        let op = op.to_string();
        move |e| self.gpu.driver_err(&op, e)
    }

    pub(super) fn upload<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        values: &[T],
    ) -> Result<CudaSlice<T>, EngineError> {
        if values.is_empty() {
            // Zero-byte allocations are rejected by the driver; kernels never read it.
            return self.zeros::<T>(1);
        }
        let bytes = std::mem::size_of_val(values);
        let slice = self
            .stream
            .clone_htod(values)
            .map_err(|e| self.gpu.sized_err("cuMemcpyHtoD", bytes, e))?;
        super::transfers::host_to_device(bytes);
        Ok(slice)
    }

    pub(super) fn zeros<T: DeviceRepr + ValidAsZeroBits>(
        &self,
        len: usize,
    ) -> Result<CudaSlice<T>, EngineError> {
        let bytes = len.max(1) * std::mem::size_of::<T>();
        self.stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(|e| self.gpu.sized_err("cuMemAlloc", bytes, e))
    }

    pub(super) fn download<T: DeviceRepr>(
        &self,
        slice: &CudaSlice<T>,
    ) -> Result<Vec<T>, EngineError> {
        let values = self
            .stream
            .clone_dtoh(slice)
            .map_err(self.err("cuMemcpyDtoH"))?;
        super::transfers::device_to_host(std::mem::size_of_val(values.as_slice()));
        Ok(values)
    }

    /// A packed validity bitmap starting at bit 0 (all ones when there are no NULLs).
    pub(super) fn validity(
        &self,
        nulls: Option<&NullBuffer>,
        rows: usize,
    ) -> Result<CudaSlice<u8>, EngineError> {
        let bytes: Vec<u8> = match nulls {
            Some(n) => n.inner().sliced().as_slice().to_vec(),
            None => vec![0xFF; rows.div_ceil(8)],
        };
        self.upload(&bytes)
    }

    pub(super) fn sync(&self) -> Result<(), EngineError> {
        self.stream
            .synchronize()
            .map_err(self.err("cuStreamSynchronize"))
    }
}

/// One CUDA device's context, modules and pools.
pub(super) struct Gpu {
    pub(super) device: DeviceId,
    pub(super) ctx: Arc<CudaContext>,
    pub(super) arch: &'static str,
    pub(super) modules: Mutex<HashMap<CudaKernel, Arc<CudaModule>>>,
    pub(super) batching: crate::BatchSizes,
    /// Allocations of device batches, reused across batches (`device_batch::DevicePool`).
    pub(super) device_pool: Arc<crate::device_batch::DevicePool>,
}

impl Gpu {
    /// Free and total device memory, in bytes.
    pub(super) fn mem_info(&self) -> Result<(usize, usize), EngineError> {
        self.ctx
            .mem_get_info()
            .map_err(|e| self.driver_err("cuMemGetInfo", e))
    }

    fn free_bytes(&self) -> Result<u64, EngineError> {
        self.mem_info().map(|(free, _)| free as u64)
    }

    /// A driver error as an `EngineError`: out of device memory is `OutOfMemory` whatever
    /// call ran out (an allocation, or a copy that allocates its destination), so that
    /// operators treat it as such (a batch on the CPU, `ResourcesExhausted`); the
    /// requested size is 0 where the caller does not know it ([`Self::sized_err`]).
    pub(super) fn driver_err(
        &self,
        operation: &str,
        e: cudarc::driver::DriverError,
    ) -> EngineError {
        self.sized_err(operation, 0, e)
    }

    /// [`Self::driver_err`] for a call that asked for `bytes` of device memory.
    pub(super) fn sized_err(
        &self,
        operation: &str,
        bytes: usize,
        e: cudarc::driver::DriverError,
    ) -> EngineError {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return EngineError::OutOfMemory {
                tier: oxidelake_core::MemoryTier::Device,
                requested_bytes: bytes as u64,
                available_bytes: self.free_bytes().unwrap_or(0),
            };
        }
        EngineError::Device {
            device: self.device,
            operation: operation.to_string(),
            detail: e.to_string(),
        }
    }

    /// The function `entry` of `kernel`, compiling and loading the module on first use.
    pub(super) fn function(
        &self,
        kernel: CudaKernel,
        entry: &str,
    ) -> Result<CudaFunction, EngineError> {
        // cuModuleGetFunction needs the context current on the calling thread, and
        // operators call from whichever blocking-pool thread runs their batch.
        self.ctx
            .bind_to_thread()
            .map_err(|e| self.driver_err("cuCtxSetCurrent", e))?;
        let module = {
            let mut modules = self
                .modules
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match modules.get(&kernel) {
                Some(m) => Arc::clone(m),
                None => {
                    let ptx = crate::nvrtc::compile(kernel, self.arch)?;
                    let m = self
                        .ctx
                        .load_module(ptx)
                        .map_err(|e| self.driver_err("cuModuleLoadData", e))?;
                    modules.insert(kernel, Arc::clone(&m));
                    m
                }
            }
        };
        module
            .load_function(entry)
            .map_err(|e| self.driver_err("cuModuleGetFunction", e))
    }
}
