//! An upload's narrow images widened where they landed (`widen_images`, ADR-0015's
//! "Narrow images across the bus"): one launch a narrowed column, enqueued after the
//! copy that brought the offsets, on the same stream, and waited for before it returns.

use oxidelake_core::EngineError;

use cudarc::driver::PushKernelArg;

use super::gpu::{Dev, grid};
use super::memory::{SyncOnExit, address};
use crate::DeviceBuffer;
use crate::device_batch::Widening;
use crate::kernels::CudaKernel;
use crate::ops::validate;

/// Enqueues `widen_images` for each of `widenings` over `memory` (checked first: the
/// kernel writes through raw addresses).
pub(super) fn widen_images(
    dev: &Dev<'_>,
    memory: &mut DeviceBuffer,
    widenings: &[Widening],
) -> Result<(), EngineError> {
    validate::widenings(memory.len(), widenings)?;
    // The kernels write `memory` through raw addresses that cudarc's events do not see:
    // whichever way this returns (a later launch failing included), they are done
    // before the caller may free it.
    let _finished = SyncOnExit(dev.stream);
    let f = dev
        .gpu
        .function(CudaKernel::FilterProject, "widen_images")?;
    for w in widenings {
        let rows = w.rows();
        if rows == 0 {
            continue;
        }
        let (narrow, out) = (
            address(memory, w.narrow.offset),
            address(memory, w.images.offset),
        );
        let (width, base, rows_u64) = (w.width as u64, w.base, rows as u64);
        let mut launch = dev.stream.launch_builder(&f);
        launch
            .arg(&narrow)
            .arg(&width)
            .arg(&base)
            .arg(&rows_u64)
            .arg(&out);
        // SAFETY: widen_images(const u8*, u64, i64, u64, i64*): `narrow` addresses
        // `rows * width` bytes and `out` `rows * 8` bytes of `memory`, every span apart
        // from every other and aligned to its width (`validate::widenings`); `memory` is
        // borrowed mutably for the call, which waits for the stream before it returns
        // (`_finished`); the kernel bounds its index by `rows`.
        #[allow(unsafe_code)]
        unsafe { launch.launch(grid(rows)) }.map_err(dev.err("launch widen_images"))?;
    }
    Ok(())
}
