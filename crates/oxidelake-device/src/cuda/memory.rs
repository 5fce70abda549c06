//! What the CUDA operators over device-resident batches (ADR-0014) share: addresses
//! inside a batch's allocation, an output allocation ordered on the stream, copies of a
//! column's spans between batches, and the wait that keeps a batch alive until the
//! kernels reading it through raw addresses are done.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use oxidelake_core::EngineError;

use super::gpu::Dev;
use crate::DeviceBuffer;
use crate::device_batch::Span;
use crate::handles::DeviceMem;

/// The device address of byte `offset` of `memory`.
pub(super) fn address(memory: &DeviceBuffer, offset: usize) -> u64 {
    (memory.address() + offset) as u64
}

/// `bytes` of zeroed device memory on `dev`'s stream (ordered before the kernels that
/// fill it) for a device batch: a parked allocation of the backend's device pool,
/// cleared on the stream, or a new one. The batch gives it back when dropped
/// ([`batch_pool`]).
pub(super) fn alloc_on_stream(dev: &Dev<'_>, bytes: usize) -> Result<DeviceBuffer, EngineError> {
    let pool = &dev.gpu.device_pool;
    if let Some(mut parked) = pool.take(bytes.max(1))
        && let DeviceMem::Cuda(slice) = &mut parked.mem
    {
        dev.stream
            .memset_zeros(slice)
            .map_err(dev.err("cuMemsetD8Async"))?;
        return Ok(parked);
    }
    pool.note_allocated();
    alloc_scratch(dev, bytes)
}

/// The device pool a device batch built on `dev` gives its allocation back to.
pub(super) fn batch_pool(dev: &Dev<'_>) -> Option<Arc<crate::device_batch::DevicePool>> {
    Some(Arc::clone(&dev.gpu.device_pool))
}

/// `bytes` of zeroed device memory on `dev`'s stream, outside the pool: for scratch
/// space an operator frees before it returns.
pub(super) fn alloc_scratch(dev: &Dev<'_>, bytes: usize) -> Result<DeviceBuffer, EngineError> {
    let slice = dev
        .stream
        .alloc_zeros::<u8>(bytes.max(1))
        .map_err(dev.err("cuMemAlloc"))?;
    let base = {
        let (ptr, _sync) = slice.device_ptr(dev.stream);
        ptr
    };
    Ok(DeviceBuffer {
        device: dev.gpu.device,
        len_bytes: bytes,
        address: usize::try_from(base).unwrap_or(usize::MAX),
        mem: DeviceMem::Cuda(slice),
    })
}

/// The CUDA allocation behind `memory`.
fn cuda_slice(memory: &DeviceBuffer) -> Result<&CudaSlice<u8>, EngineError> {
    match &memory.mem {
        DeviceMem::Cuda(slice) => Ok(slice),
        _ => Err(EngineError::Internal(
            "a CUDA operator got another backend's memory".into(),
        )),
    }
}

/// Enqueues a device-to-device copy of span `from` of `src` into span `to` of `dst`
/// (equal lengths; nothing for an empty span).
pub(super) fn copy_span(
    dev: &Dev<'_>,
    src: &DeviceBuffer,
    from: Span,
    dst: &mut DeviceBuffer,
    to: Span,
) -> Result<(), EngineError> {
    if from.len != to.len {
        return Err(EngineError::Internal(format!(
            "a device-batch copy of {} bytes into a span of {}",
            from.len, to.len
        )));
    }
    if from.len == 0 {
        return Ok(());
    }
    let source = cuda_slice(src)?.slice(from.offset..from.offset + from.len);
    let DeviceMem::Cuda(target) = &mut dst.mem else {
        return Err(EngineError::Internal(
            "a CUDA operator got another backend's memory".into(),
        ));
    };
    let mut target = target.slice_mut(to.offset..to.offset + to.len);
    dev.stream
        .memcpy_dtod(&source, &mut target)
        .map_err(dev.err("cuMemcpyDtoDAsync"))
}

/// Copies span `span` of `memory` to the host (counted as a device-to-host copy); waits
/// for it, and so for every earlier kernel on the stream.
pub(super) fn download_span(
    dev: &Dev<'_>,
    memory: &DeviceBuffer,
    span: Span,
) -> Result<Vec<u8>, EngineError> {
    if span.len == 0 {
        return Ok(Vec::new());
    }
    let source = cuda_slice(memory)?.slice(span.offset..span.offset + span.len);
    let bytes = dev
        .stream
        .clone_dtoh(&source)
        .map_err(dev.err("cuMemcpyDtoH"))?;
    super::transfers::device_to_host(bytes.len());
    Ok(bytes)
}

/// Waits for its stream when dropped (errors ignored: the stream's own error is what the
/// caller reports). The kernels reach device batches through raw addresses that
/// cudarc's per-allocation events cannot see, so whatever path an operator leaves by,
/// its work must be finished before the caller may drop an input or output batch.
pub(super) struct SyncOnExit<'a>(pub(super) &'a Arc<CudaStream>);

impl Drop for SyncOnExit<'_> {
    fn drop(&mut self) {
        let _ = self.0.synchronize();
    }
}

/// The device address of `slice` (its writes are ordered on `dev`'s stream before any
/// kernel enqueued there after this call).
pub(super) fn slice_address<T>(dev: &Dev<'_>, slice: &CudaSlice<T>) -> u64 {
    use cudarc::driver::DevicePtr;
    let (ptr, _sync) = slice.device_ptr(dev.stream);
    ptr
}
