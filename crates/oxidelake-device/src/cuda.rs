//! `CudaBackend`: NVIDIA GPUs through cudarc's driver API (feature `cuda`).
//!
//! cudarc is loaded dynamically, so this code builds on machines without CUDA; the
//! backend is only constructed after [`crate::probe_cuda`] found a driver and a device.
//! Kernels are compiled by [`crate::nvrtc::compile`] on first use, for the newest virtual
//! architecture the device supports, and the loaded module is cached per kernel (each
//! backend instance drives one device, so that is per (kernel, device)).

mod aggregate;
mod evaluate;
mod filter;
mod gather;
mod gpu;
mod join_build;
mod join_probe;
mod memory;
mod transfers;
mod vector_distance;
mod widen;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, DevicePtr, LaunchConfig, PushKernelArg};
use oxidelake_core::{BackendKind, DeviceId, EngineError};
use oxidelake_memory::HostAllocator;

use crate::backend::{check_bitmap_range, check_copy_fits, check_copy_lengths};
use crate::device_batch::DeviceColumns;
use crate::handles::{DeviceMem, StreamInner, foreign_handle};
use crate::kernels::CudaKernel;
use crate::{
    CudaAvailability, DeviceBatch, DeviceBuffer, DeviceMemory, DeviceStream, GpuBackend,
    HostBuffer, MemoryInfo,
};

/// Threads per block for the 1-D kernels (a multiple of the warp size).
const BLOCK_THREADS: u32 = 256;
/// Upper bound on blocks for grid-stride kernels.
const MAX_GRID_BLOCKS: u32 = 4096;

/// One CUDA device.
pub struct CudaBackend {
    gpu: gpu::Gpu,
    host: HostAllocator,
}

/// A batch's columns on the device an operator runs on: those it already had, or those
/// of a host batch uploaded for the call.
enum OnThisDevice<'a> {
    Held(&'a DeviceColumns),
    Uploaded(DeviceColumns),
}

impl std::ops::Deref for OnThisDevice<'_> {
    type Target = DeviceColumns;

    fn deref(&self) -> &DeviceColumns {
        match self {
            Self::Held(columns) => columns,
            Self::Uploaded(columns) => columns,
        }
    }
}

/// Most bytes of device-batch allocations the device pool keeps parked, unless
/// `OXIDE_CUDA_DEVICE_POOL_BYTES` says otherwise: a few device-sized batches per
/// operator in flight.
const DEFAULT_DEVICE_POOL_BYTES: usize = 1 << 30;

impl std::fmt::Debug for CudaBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaBackend")
            .field("device", &self.gpu.device)
            .field("arch", &self.gpu.arch)
            .finish_non_exhaustive()
    }
}

impl CudaBackend {
    /// Opens device `ordinal`. Fails with [`EngineError::BackendUnavailable`] when there
    /// is no driver or no such device; never panics.
    pub fn try_new(ordinal: usize) -> Result<Self, EngineError> {
        let unavailable = |reason: String| EngineError::BackendUnavailable {
            requested: BackendKind::Cuda,
            reason,
        };
        match crate::probe_cuda() {
            CudaAvailability::Unavailable { reason } => return Err(unavailable(reason)),
            CudaAvailability::Available { devices } if ordinal >= devices => {
                return Err(unavailable(format!(
                    "device {ordinal} requested but the driver reports {devices}"
                )));
            }
            CudaAvailability::Available { .. } => {}
        }
        // Kernels compile at run time: libnvrtc ships with the CUDA toolkit, not with the
        // driver, so a machine can have a GPU and no compiler. Refuse the backend now,
        // with the reason, rather than fail every operator's first batch.
        if !crate::nvrtc_available() {
            return Err(unavailable(
                "the CUDA driver is present but libnvrtc (the runtime kernel compiler, \
                 in the CUDA toolkit or the nvidia-cuda-nvrtc-cu12 wheel) could not be \
                 loaded; add its directory to LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let device = DeviceId::new(
            BackendKind::Cuda,
            u32::try_from(ordinal).unwrap_or(u32::MAX),
        );
        let driver = |operation: &str| {
            let operation = operation.to_string();
            move |e: cudarc::driver::DriverError| EngineError::Device {
                device,
                operation,
                detail: e.to_string(),
            }
        };
        let ctx = CudaContext::new(ordinal).map_err(driver("cuCtxCreate"))?;
        let (major, minor) = ctx
            .compute_capability()
            .map_err(driver("cuDeviceGetAttribute(compute capability)"))?;
        let arch = crate::nvrtc::arch_for(major, minor);
        let batching = crate::BatchSizes::from_env()?;
        let device_pool_bytes =
            crate::batching::env_count("OXIDE_CUDA_DEVICE_POOL_BYTES", "device pool size")?
                .unwrap_or(DEFAULT_DEVICE_POOL_BYTES);
        tracing::info!(%device, major, minor, arch, ?batching, "CUDA backend ready");
        Ok(Self {
            host: HostAllocator::pinned(Arc::clone(&ctx)),
            gpu: gpu::Gpu {
                device,
                ctx,
                arch,
                modules: Mutex::new(HashMap::new()),
                batching,
                device_pool: Arc::new(crate::device_batch::DevicePool::new(device_pool_bytes)),
            },
        })
    }

    /// The same backend with other batch sizes (tests, embedding applications).
    pub fn with_batching(mut self, batching: crate::BatchSizes) -> Self {
        self.gpu.batching = batching;
        self
    }

    /// The same backend with a device pool that keeps at most `bytes` of device-batch
    /// allocations parked (0: every device batch allocates; for comparisons).
    pub fn with_device_pool_bytes(mut self, bytes: usize) -> Self {
        self.gpu.device_pool = Arc::new(crate::device_batch::DevicePool::new(bytes));
        self
    }

    /// The device pool's counters: allocations made and reused, bytes parked.
    pub fn device_pool_stats(&self) -> crate::device_batch::DevicePoolStats {
        self.gpu.device_pool.stats()
    }

    /// The virtual architecture kernels are compiled for.
    pub fn arch(&self) -> &'static str {
        self.gpu.arch
    }

    fn stream<'a>(
        &self,
        stream: &'a DeviceStream,
    ) -> Result<&'a Arc<cudarc::driver::CudaStream>, EngineError> {
        match &stream.inner {
            StreamInner::Cuda(s) if stream.device == self.gpu.device => Ok(s),
            _ => Err(foreign_handle(self.gpu.device, stream.device, "stream")),
        }
    }

    /// The launch context on `stream`.
    fn dev<'a>(&'a self, stream: &'a DeviceStream) -> Result<gpu::Dev<'a>, EngineError> {
        Ok(gpu::Dev {
            gpu: &self.gpu,
            backend: self,
            stream: self.stream(stream)?,
        })
    }

    /// `batch`'s columns on this device: a host batch is uploaded (one copy, the form a
    /// kernel reads); a batch another device holds is refused.
    fn on_device<'a>(
        &self,
        stream: &DeviceStream,
        batch: &'a DeviceBatch,
    ) -> Result<OnThisDevice<'a>, EngineError> {
        match (batch.on_device(), batch.as_host()) {
            (Some(columns), _) if columns.memory().device() == self.gpu.device => {
                Ok(OnThisDevice::Held(columns))
            }
            (Some(columns), _) => Err(foreign_handle(
                self.gpu.device,
                columns.memory().device(),
                "device batch",
            )),
            (None, Some(host)) => crate::device_batch::upload_columns(self, stream, host, None)
                .map(OnThisDevice::Uploaded),
            (None, None) => Err(EngineError::Internal("a batch in neither form".into())),
        }
    }
}

impl DeviceMemory for CudaBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cuda
    }

    fn device(&self) -> DeviceId {
        self.gpu.device
    }

    fn batching(&self) -> Option<crate::BatchSizes> {
        Some(self.gpu.batching)
    }

    fn memory_info(&self) -> Result<MemoryInfo, EngineError> {
        let (free, total) = self
            .gpu
            .ctx
            .mem_get_info()
            .map_err(|e| self.gpu.driver_err("cuMemGetInfo", e))?;
        Ok(MemoryInfo {
            total_bytes: total as u64,
            free_bytes: free as u64,
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, EngineError> {
        let stream = self.gpu.ctx.default_stream();
        // cuMemAlloc rejects zero bytes; an empty buffer still owns one byte.
        let slice = stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| self.gpu.sized_err("cuMemAlloc", bytes, e))?;
        let address = {
            let (ptr, _sync) = slice.device_ptr(&stream);
            usize::try_from(ptr).unwrap_or(usize::MAX)
        };
        Ok(DeviceBuffer {
            device: self.gpu.device,
            len_bytes: bytes,
            address,
            mem: DeviceMem::Cuda(slice),
        })
    }

    fn alloc_pinned_host(&self, bytes: usize) -> Result<HostBuffer, EngineError> {
        Ok(HostBuffer::new(self.gpu.device, self.host.alloc(bytes)?))
    }

    fn create_stream(&self) -> Result<DeviceStream, EngineError> {
        let stream = self
            .gpu
            .ctx
            .new_stream()
            .map_err(|e| self.gpu.driver_err("cuStreamCreate", e))?;
        Ok(DeviceStream {
            device: self.gpu.device,
            inner: StreamInner::Cuda(stream),
        })
    }

    fn copy_h2d(
        &self,
        stream: &DeviceStream,
        src: &HostBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), EngineError> {
        let s = self.stream(stream)?;
        check_copy_fits(src.len(), dst.len())?;
        let len = src.len();
        let DeviceMem::Cuda(slice) = &mut dst.mem else {
            return Err(foreign_handle(self.gpu.device, dst.device, "device buffer"));
        };
        if len == 0 {
            return Ok(());
        }
        let mut view = slice.slice_mut(0..len);
        let result = match src.mem.pinned() {
            Some(pinned) => s.memcpy_htod(pinned, &mut view),
            None => s.memcpy_htod(src.as_slice()?, &mut view),
        };
        result.map_err(|e| self.gpu.driver_err("cuMemcpyHtoDAsync", e))?;
        transfers::host_to_device(len);
        Ok(())
    }

    fn copy_d2h(
        &self,
        stream: &DeviceStream,
        src: &DeviceBuffer,
        dst: &mut HostBuffer,
    ) -> Result<(), EngineError> {
        let s = self.stream(stream)?;
        check_copy_lengths(src.len(), dst.len())?;
        let len = src.len_bytes;
        let DeviceMem::Cuda(slice) = &src.mem else {
            return Err(foreign_handle(self.gpu.device, src.device, "device buffer"));
        };
        if len == 0 {
            return Ok(());
        }
        let view = slice.slice(0..len);
        let result = match dst.mem.pinned_mut() {
            Some(pinned) => s.memcpy_dtoh(&view, pinned),
            None => s.memcpy_dtoh(&view, dst.as_mut_slice()?),
        };
        result.map_err(|e| self.gpu.driver_err("cuMemcpyDtoHAsync", e))?;
        transfers::device_to_host(len);
        Ok(())
    }

    fn synchronize(&self, stream: &DeviceStream) -> Result<(), EngineError> {
        self.stream(stream)?
            .synchronize()
            .map_err(|e| self.gpu.driver_err("cuStreamSynchronize", e))
    }

    fn null_count(
        &self,
        stream: &DeviceStream,
        validity: &DeviceBuffer,
        offset_bits: usize,
        len_bits: usize,
    ) -> Result<u64, EngineError> {
        let s = self.stream(stream)?;
        check_bitmap_range(validity.len(), offset_bits, len_bits)?;
        let DeviceMem::Cuda(bitmap) = &validity.mem else {
            return Err(foreign_handle(
                self.gpu.device,
                validity.device,
                "device buffer",
            ));
        };
        if len_bits == 0 {
            return Ok(0);
        }
        let function = self
            .gpu
            .function(CudaKernel::NullCount, "count_unset_bits")?;
        let mut out = s
            .alloc_zeros::<u64>(1)
            .map_err(|e| self.gpu.driver_err("cuMemAlloc", e))?;
        let blocks = u32::try_from(len_bits.div_ceil(BLOCK_THREADS as usize))
            .unwrap_or(MAX_GRID_BLOCKS)
            .clamp(1, MAX_GRID_BLOCKS);
        let config = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        // Scalars are bound to locals: the builder borrows them until launch.
        let (bitmap_bytes, offset, len) =
            (validity.len() as u64, offset_bits as u64, len_bits as u64);
        let mut launch = s.launch_builder(&function);
        launch
            .arg(bitmap)
            .arg(&bitmap_bytes)
            .arg(&offset)
            .arg(&len)
            .arg(&mut out);
        // SAFETY: the argument list matches `count_unset_bits(const u8*, u64, u64, u64,
        // u64*)` in null_count.cu; `bitmap` holds at least `bitmap_bytes` bytes (the
        // kernel guards every read with that bound), `out` holds one u64, and the block
        // size is a multiple of 32 as the warp reduction requires.
        #[allow(unsafe_code)]
        unsafe { launch.launch(config) }
            .map_err(|e| self.gpu.driver_err("cuLaunchKernel(count_unset_bits)", e))?;
        let result = s
            .clone_dtoh(&out)
            .map_err(|e| self.gpu.driver_err("cuMemcpyDtoH", e))?;
        transfers::device_to_host(std::mem::size_of::<u64>());
        result
            .first()
            .copied()
            .ok_or_else(|| EngineError::Internal("count_unset_bits returned no value".into()))
    }

    fn device_pool(&self) -> Option<Arc<crate::device_batch::DevicePool>> {
        Some(Arc::clone(&self.gpu.device_pool))
    }

    fn download_columns(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        columns: &[usize],
    ) -> Result<Vec<arrow::array::ArrayRef>, EngineError> {
        let batch = self.on_device(stream, batch)?;
        join_build::download_columns(&self.dev(stream)?, &batch, columns)
    }
}

impl GpuBackend for CudaBackend {
    fn filter_project(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        predicates: &[crate::ops::Predicate],
        projection: &[usize],
    ) -> Result<DeviceBatch, EngineError> {
        let batch = self.on_device(stream, batch)?;
        filter::filter_project(&self.dev(stream)?, &batch, predicates, projection)
            .map(DeviceBatch::from)
    }

    fn evaluate(
        &self,
        stream: &DeviceStream,
        args: crate::ops::EvaluateArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        let batch = self.on_device(stream, args.batch)?;
        evaluate::evaluate(&self.dev(stream)?, &batch, args).map(DeviceBatch::from)
    }

    fn aggregate(
        &self,
        stream: &DeviceStream,
        args: crate::ops::AggregateArgs<'_>,
    ) -> Result<arrow::record_batch::RecordBatch, EngineError> {
        let batch = self.on_device(stream, args.batch)?;
        aggregate::aggregate(&self.dev(stream)?, stream, &batch, args)
    }

    fn build_join_table(
        &self,
        stream: &DeviceStream,
        batch: &DeviceBatch,
        key: crate::ops::JoinKey<'_>,
    ) -> Result<crate::JoinTable, EngineError> {
        let batch = self.on_device(stream, batch)?;
        let table = join_build::build_table(&self.dev(stream)?, &batch, key)?;
        Ok(crate::JoinTable::new(
            self.gpu.device,
            batch.num_rows(),
            table.allocated_bytes(),
            table,
        ))
    }

    fn join(
        &self,
        stream: &DeviceStream,
        table: &crate::JoinTable,
        args: crate::ops::JoinArgs<'_>,
    ) -> Result<DeviceBatch, EngineError> {
        let build = (args.build.map(|b| self.on_device(stream, b))).transpose()?;
        let probe = self.on_device(stream, args.probe)?;
        let t = table.table_on::<join_build::CudaJoinTable>(self.gpu.device)?;
        join_probe::join(&self.dev(stream)?, t, build.as_deref(), &probe, args)
            .map(DeviceBatch::from)
    }

    fn append(
        &self,
        stream: &DeviceStream,
        batches: &[DeviceBatch],
        schema: arrow::datatypes::SchemaRef,
    ) -> Result<DeviceBatch, EngineError> {
        let held = batches
            .iter()
            .map(|b| self.on_device(stream, b))
            .collect::<Result<Vec<_>, _>>()?;
        let parts: Vec<&DeviceColumns> = held.iter().map(|h| &**h).collect();
        join_build::append(&self.dev(stream)?, &parts, schema).map(DeviceBatch::from)
    }

    fn widen_images(
        &self,
        stream: &DeviceStream,
        memory: &mut DeviceBuffer,
        widenings: &[crate::device_batch::Widening],
    ) -> Result<(), EngineError> {
        if memory.device != self.gpu.device {
            return Err(foreign_handle(
                self.gpu.device,
                memory.device,
                "device buffer",
            ));
        }
        widen::widen_images(&self.dev(stream)?, memory, widenings)
    }

    fn vector_distance(
        &self,
        stream: &DeviceStream,
        args: crate::ops::VectorDistanceArgs<'_>,
    ) -> Result<arrow::array::Float64Array, EngineError> {
        vector_distance::vector_distance(&self.dev(stream)?, args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxidelake_memory::MemoryClass;

    fn backend() -> CudaBackend {
        CudaBackend::try_new(0).unwrap_or_else(|e| panic!("needs a CUDA device: {e}"))
    }

    #[test]
    fn without_a_driver_construction_is_a_typed_error_not_a_panic() {
        if crate::probe_cuda().devices() > 0 {
            eprintln!("skipping: a CUDA device is present");
            return;
        }
        assert!(matches!(
            CudaBackend::try_new(0),
            Err(EngineError::BackendUnavailable {
                requested: BackendKind::Cuda,
                ..
            })
        ));
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --features cuda -- --ignored"]
    fn cuda_device_buffers_are_128_byte_aligned_and_round_trip_bytes() {
        let cuda = backend();
        let data: Vec<u8> = (0..(1u32 << 20)).map(|i| (i * 13 % 251) as u8).collect();
        let stream = cuda.create_stream().unwrap();
        let mut host = cuda.alloc_pinned_host(data.len()).unwrap();
        assert_eq!(host.memory_class(), MemoryClass::Pinned);
        host.as_mut_slice().unwrap().copy_from_slice(&data);
        let mut dev = cuda.alloc_device(data.len()).unwrap();
        assert_eq!(dev.address() % 128, 0);
        cuda.copy_h2d(&stream, &host, &mut dev).unwrap();
        let mut back = cuda.alloc_pinned_host(data.len()).unwrap();
        cuda.copy_d2h(&stream, &dev, &mut back).unwrap();
        cuda.synchronize(&stream).unwrap();
        assert_eq!(back.as_slice().unwrap(), &data[..]);
        let info = cuda.memory_info().unwrap();
        assert!(info.total_bytes > 0 && info.free_bytes <= info.total_bytes);
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --features cuda -- --ignored"]
    fn copies_add_their_bytes_to_the_telemetry_hubs_transfer_totals() {
        let cuda = backend();
        let hub = oxidelake_core::TelemetryHub::global();
        let before = hub.snapshot().transfers;
        let stream = cuda.create_stream().unwrap();
        let mut host = cuda.alloc_pinned_host(4096).unwrap();
        host.as_mut_slice().unwrap().fill(7);
        let mut dev = cuda.alloc_device(4096).unwrap();
        cuda.copy_h2d(&stream, &host, &mut dev).unwrap();
        cuda.copy_d2h(&stream, &dev, &mut host).unwrap();
        cuda.synchronize(&stream).unwrap();
        let after = hub.snapshot().transfers;
        // Other tests of this binary copy too; the totals only grow.
        assert!(
            after.h2d_bytes >= before.h2d_bytes + 4096,
            "{before:?} → {after:?}"
        );
        assert!(
            after.d2h_bytes >= before.d2h_bytes + 4096,
            "{before:?} → {after:?}"
        );
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --features cuda -- --ignored"]
    fn a_batch_with_more_keys_than_the_first_group_table_is_aggregated_on_the_device() {
        use arrow::array::{ArrayRef, Float64Array, Int64Array};
        use arrow::record_batch::RecordBatch;

        use crate::ops::{Agg, AggFunc, AggInput, HostAggregateArgs};

        let cuda = backend();
        let cpu = crate::CpuBackend::new();
        // 20,011 distinct keys and NULLs in 50,000 rows: five times the first table.
        let rows = 50_000i64;
        let keys =
            Int64Array::from_iter((0..rows).map(|i| (i % 97 != 0).then_some(i * 7919 % 20_011)));
        let ints =
            Int64Array::from_iter((0..rows).map(|i| (i % 89 != 0).then_some(i % 1000 - 500)));
        let floats = Float64Array::from_iter_values((0..rows).map(|i| (i % 113) as f64 / 7.0));
        let batch = RecordBatch::try_from_iter([
            ("k", Arc::new(keys) as ArrayRef),
            ("v", Arc::new(ints) as ArrayRef),
            ("f", Arc::new(floats) as ArrayRef),
        ])
        .unwrap();
        let agg = |func, input| Agg { func, input };
        let aggregates = [
            agg(AggFunc::Sum, AggInput::Int(1)),
            agg(AggFunc::Count, AggInput::Valid(1)),
            agg(AggFunc::Min, AggInput::Float(2)),
            agg(AggFunc::Max, AggInput::Int(1)),
        ];
        let args = HostAggregateArgs {
            batch: &batch,
            keys: &[0],
            aggregates: &aggregates,
        };
        let run = |b: &dyn GpuBackend| {
            let stream = b.create_stream().unwrap();
            let out = crate::edge::aggregate(b, &stream, args).unwrap();
            let text = arrow::util::pretty::pretty_format_batches(&[out])
                .unwrap()
                .to_string();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            lines.sort();
            lines
        };
        let on_device = run(&cuda);
        // 20,011 groups, the NULL group, a header and four border lines.
        assert_eq!(on_device.len(), 20_012 + 4);
        assert!(
            on_device == run(&cpu),
            "the device groups differ from the CPU's"
        );
    }

    #[test]
    #[ignore = "needs an NVIDIA GPU; run with --features cuda -- --ignored"]
    fn cuda_null_count_kernel_matches_the_cpu_backend() {
        let cuda = backend();
        let cpu = crate::CpuBackend::new();
        let validity: Vec<u8> = (0..100_003u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let upload = |b: &dyn GpuBackend| {
            let s = b.create_stream().unwrap();
            let mut h = b.alloc_pinned_host(validity.len()).unwrap();
            h.as_mut_slice().unwrap().copy_from_slice(&validity);
            let mut d = b.alloc_device(validity.len()).unwrap();
            b.copy_h2d(&s, &h, &mut d).unwrap();
            (s, d)
        };
        let (cs, cd) = upload(&cuda);
        let (ps, pd) = upload(&cpu);
        for (offset, len) in [(0, 0), (0, 800_024), (5, 799_000), (3, 1), (31, 33)] {
            assert_eq!(
                cuda.null_count(&cs, &cd, offset, len).unwrap(),
                cpu.null_count(&ps, &pd, offset, len).unwrap(),
                "{offset}+{len}"
            );
        }
    }
}
