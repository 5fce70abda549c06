//! The Metal objects the device handles hold (a shared-storage buffer, a command queue),
//! apart from the backend, so that `handles` names no backend module. Built only for
//! macOS with the `metal` feature, and never compiled so far (see `metal.rs`).

use std::ptr::NonNull;

use objc2::rc::Retained;
use objc2::runtime::ProtocolObject;
use objc2_metal::{MTLBuffer, MTLCommandQueue};

/// A shared-storage Metal buffer.
pub(crate) struct SharedBuffer(pub(super) Retained<ProtocolObject<dyn MTLBuffer>>);

// SAFETY: Metal resources may be retained, released and used from any thread (Apple's
// Metal threading guide); the bytes are only reached through `&`/`&mut` methods of the
// owning `DeviceBuffer`, which Rust's borrow rules serialise.
#[allow(unsafe_code)]
unsafe impl Send for SharedBuffer {}
// SAFETY: as above; shared references only read the contents.
#[allow(unsafe_code)]
unsafe impl Sync for SharedBuffer {}

impl SharedBuffer {
    pub(super) fn bytes(&self, len: usize) -> &[u8] {
        let ptr: NonNull<std::ffi::c_void> = self.0.contents();
        // SAFETY: `contents()` of a shared-storage buffer is a CPU pointer to at least
        // `length()` bytes, and `len <= length()` (allocated with max(len, 1) bytes). The
        // memory lives as long as the retained buffer, i.e. as long as `self`.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(ptr.as_ptr().cast::<u8>(), len)
        }
    }

    pub(super) fn bytes_mut(&mut self, len: usize) -> &mut [u8] {
        let ptr: NonNull<std::ffi::c_void> = self.0.contents();
        // SAFETY: as in `bytes`, and `&mut self` gives exclusive access from the CPU side;
        // no command buffer is encoded against this buffer while a copy runs.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(ptr.as_ptr().cast::<u8>(), len)
        }
    }
}

/// A Metal command queue (the backend's stream).
pub(crate) struct MetalQueue(
    #[allow(dead_code)] pub(super) Retained<ProtocolObject<dyn MTLCommandQueue>>,
);
