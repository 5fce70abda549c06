//! `MetalBackend`: Apple GPUs on unified memory (feature `metal`, macOS only).
//!
//! What the code here does: it opens the system default device, allocates device
//! buffers with `MTLResourceStorageModeShared` (on Apple silicon the CPU and GPU share
//! one physical memory, so a "copy" between host and device is a `memcpy` into the
//! buffer's contents), makes a command queue for each stream, and counts a validity
//! bitmap's nulls on the CPU. It compiles no kernel and encodes no command: every
//! operator method (`filter_project`, `build_join_table`, `join`, `evaluate`,
//! `aggregate`, `vector_distance`) returns an error, so the operators would run each
//! batch on the CPU. The two MSL sources in `kernels/metal/` are embedded by
//! `kernels::MetalKernel` but nothing loads them.
//!
//! Verification: none. This file is built only for macOS targets with the `metal`
//! feature, and no machine the project has used is a Mac, so it has never been
//! compiled, let alone run (see STATUS.md).

use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{MTLCreateSystemDefaultDevice, MTLDevice, MTLResourceOptions};
use oxidelake_core::{BackendKind, DeviceId, EngineError};
use oxidelake_memory::HostAllocator;

pub(crate) mod objects;

use crate::backend::{check_copy_fits, check_copy_lengths, host_null_count, host_widen_images};
use crate::handles::{DeviceMem, StreamInner, foreign_handle};
use crate::{DeviceBuffer, DeviceMemory, DeviceStream, GpuBackend, HostBuffer, MemoryInfo};
use objects::{MetalQueue, SharedBuffer};

/// The system default Metal device.
pub struct MetalBackend {
    device: Retained<ProtocolObject<dyn MTLDevice>>,
    host: HostAllocator,
}

impl std::fmt::Debug for MetalBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetalBackend").finish_non_exhaustive()
    }
}

const METAL_DEVICE: DeviceId = DeviceId {
    kind: BackendKind::Metal,
    ordinal: 0,
};

impl MetalBackend {
    /// Opens the system default device, or explains why there is none.
    pub fn try_new() -> Result<Self, EngineError> {
        let device =
            MTLCreateSystemDefaultDevice().ok_or_else(|| EngineError::BackendUnavailable {
                requested: BackendKind::Metal,
                reason: "MTLCreateSystemDefaultDevice returned no device".into(),
            })?;
        Ok(Self {
            device,
            host: HostAllocator::pageable(
                "Metal uses unified memory; host buffers need no pinning",
            ),
        })
    }

    fn shared<'a>(&self, buf: &'a DeviceBuffer) -> Result<&'a SharedBuffer, EngineError> {
        match &buf.mem {
            DeviceMem::Metal(b) if buf.device == METAL_DEVICE => Ok(b),
            _ => Err(foreign_handle(METAL_DEVICE, buf.device, "device buffer")),
        }
    }

    fn check_stream(&self, stream: &DeviceStream) -> Result<(), EngineError> {
        match &stream.inner {
            StreamInner::Metal(_) if stream.device == METAL_DEVICE => Ok(()),
            _ => Err(foreign_handle(METAL_DEVICE, stream.device, "stream")),
        }
    }
}

impl DeviceMemory for MetalBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Metal
    }

    fn device(&self) -> DeviceId {
        METAL_DEVICE
    }

    fn memory_info(&self) -> Result<MemoryInfo, EngineError> {
        let total = self.device.recommendedMaxWorkingSetSize();
        let used = self.device.currentAllocatedSize() as u64;
        Ok(MemoryInfo {
            total_bytes: total,
            free_bytes: total.saturating_sub(used),
        })
    }

    fn alloc_device(&self, bytes: usize) -> Result<DeviceBuffer, EngineError> {
        let buffer = self
            .device
            .newBufferWithLength_options(bytes.max(1), MTLResourceOptions::StorageModeShared)
            .ok_or(EngineError::OutOfMemory {
                tier: oxidelake_core::MemoryTier::Device,
                requested_bytes: bytes as u64,
                available_bytes: self.memory_info().map(|m| m.free_bytes).unwrap_or(0),
            })?;
        let mut shared = SharedBuffer(buffer);
        shared.bytes_mut(bytes).fill(0);
        let address = shared.bytes(bytes).as_ptr() as usize;
        Ok(DeviceBuffer {
            device: METAL_DEVICE,
            len_bytes: bytes,
            address,
            mem: DeviceMem::Metal(shared),
        })
    }

    fn alloc_pinned_host(&self, bytes: usize) -> Result<HostBuffer, EngineError> {
        Ok(HostBuffer::new(METAL_DEVICE, self.host.alloc(bytes)?))
    }

    fn create_stream(&self) -> Result<DeviceStream, EngineError> {
        let queue = self
            .device
            .newCommandQueue()
            .ok_or_else(|| EngineError::Device {
                device: METAL_DEVICE,
                operation: "newCommandQueue".into(),
                detail: "the device returned no queue".into(),
            })?;
        Ok(DeviceStream {
            device: METAL_DEVICE,
            inner: StreamInner::Metal(MetalQueue(queue)),
        })
    }

    fn copy_h2d(
        &self,
        stream: &DeviceStream,
        src: &HostBuffer,
        dst: &mut DeviceBuffer,
    ) -> Result<(), EngineError> {
        self.check_stream(stream)?;
        check_copy_fits(src.len(), dst.len())?;
        let len = dst.len_bytes;
        match &mut dst.mem {
            DeviceMem::Metal(b) if dst.device == METAL_DEVICE => {
                let src = src.as_slice()?;
                b.bytes_mut(len)[..src.len()].copy_from_slice(src);
                Ok(())
            }
            _ => Err(foreign_handle(METAL_DEVICE, dst.device, "device buffer")),
        }
    }

    fn copy_d2h(
        &self,
        stream: &DeviceStream,
        src: &DeviceBuffer,
        dst: &mut HostBuffer,
    ) -> Result<(), EngineError> {
        self.check_stream(stream)?;
        check_copy_lengths(src.len(), dst.len())?;
        let bytes = self.shared(src)?.bytes(src.len_bytes);
        dst.as_mut_slice()?.copy_from_slice(bytes);
        Ok(())
    }

    fn synchronize(&self, stream: &DeviceStream) -> Result<(), EngineError> {
        // Copies on unified memory complete before they return, and no kernel is ever
        // encoded (every operator is refused), so there is nothing to wait for.
        self.check_stream(stream)
    }

    fn null_count(
        &self,
        stream: &DeviceStream,
        validity: &DeviceBuffer,
        offset_bits: usize,
        len_bits: usize,
    ) -> Result<u64, EngineError> {
        self.check_stream(stream)?;
        // Unified memory: counting on the CPU checks the same bytes a kernel would.
        host_null_count(
            self.shared(validity)?.bytes(validity.len_bytes),
            offset_bits,
            len_bits,
        )
    }
}

/// The refusal of every Metal operator: none is wired to a kernel, so the calling
/// operator runs the batch on the CPU.
fn not_wired(operator: &'static str) -> EngineError {
    EngineError::unsupported(
        operator,
        "the Metal operator path is not wired yet; the operator runs this batch on the CPU",
    )
}

impl GpuBackend for MetalBackend {
    fn filter_project(
        &self,
        _stream: &DeviceStream,
        _batch: &crate::DeviceBatch,
        _predicates: &[crate::ops::Predicate],
        _projection: &[usize],
    ) -> Result<crate::DeviceBatch, EngineError> {
        Err(not_wired("Metal filter_project"))
    }

    fn evaluate(
        &self,
        _stream: &DeviceStream,
        _args: crate::ops::EvaluateArgs<'_>,
    ) -> Result<crate::DeviceBatch, EngineError> {
        Err(not_wired("Metal computed columns"))
    }

    fn aggregate(
        &self,
        _stream: &DeviceStream,
        _args: crate::ops::AggregateArgs<'_>,
    ) -> Result<arrow::record_batch::RecordBatch, EngineError> {
        Err(not_wired("Metal aggregate"))
    }

    fn build_join_table(
        &self,
        _stream: &DeviceStream,
        _batch: &crate::DeviceBatch,
        _key: crate::ops::JoinKey<'_>,
    ) -> Result<crate::JoinTable, EngineError> {
        Err(not_wired("Metal hash join"))
    }

    fn join(
        &self,
        _stream: &DeviceStream,
        table: &crate::JoinTable,
        _args: crate::ops::JoinArgs<'_>,
    ) -> Result<crate::DeviceBatch, EngineError> {
        Err(foreign_handle(self.device(), table.device(), "join table"))
    }

    fn append(
        &self,
        _stream: &DeviceStream,
        _batches: &[crate::DeviceBatch],
        _schema: arrow::datatypes::SchemaRef,
    ) -> Result<crate::DeviceBatch, EngineError> {
        Err(not_wired("Metal batch append"))
    }

    fn widen_images(
        &self,
        stream: &DeviceStream,
        memory: &mut DeviceBuffer,
        widenings: &[crate::device_batch::Widening],
    ) -> Result<(), EngineError> {
        // Unified memory: the CPU writes the bytes the GPU reads.
        self.check_stream(stream)?;
        crate::ops::validate::widenings(memory.len(), widenings)?;
        let len = memory.len_bytes;
        match &mut memory.mem {
            DeviceMem::Metal(b) if memory.device == METAL_DEVICE => {
                host_widen_images(b.bytes_mut(len), widenings);
                Ok(())
            }
            _ => Err(foreign_handle(METAL_DEVICE, memory.device, "device buffer")),
        }
    }

    fn vector_distance(
        &self,
        _stream: &DeviceStream,
        _args: crate::ops::VectorDistanceArgs<'_>,
    ) -> Result<arrow::array::Float64Array, EngineError> {
        Err(not_wired("Metal vector_distance"))
    }
}
