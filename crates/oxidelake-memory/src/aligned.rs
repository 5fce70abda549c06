//! `AlignedBuf`: an owned, zero-initialised, over-aligned host allocation.

use std::alloc::{self, Layout};
use std::ptr::NonNull;

use oxidelake_core::BufferLayout;

use crate::MemoryError;

/// An owned host allocation aligned to 64 bytes (host) or 128 bytes (device-bound).
///
/// The allocation is zero-initialised and padded to a whole number of alignment units
/// (see [`BufferLayout::padded_len_bytes`]); [`AlignedBuf::len`] is the length the caller
/// asked for. The memory is released exactly once, when the buffer is dropped.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len_bytes: usize,
    layout: Layout,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like Vec<u8>); shared access only
// hands out `&[u8]`, and mutation requires `&mut self`.
#[allow(unsafe_code)]
unsafe impl Send for AlignedBuf {}
// SAFETY: as above, `&AlignedBuf` only exposes immutable byte slices.
#[allow(unsafe_code)]
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// Allocates a zeroed buffer with the given layout.
    pub fn zeroed(layout: BufferLayout) -> Result<Self, MemoryError> {
        let padded = layout.padded_len_bytes().map_err(MemoryError::Layout)?;
        let std_layout = Layout::from_size_align(padded, layout.align_bytes()).map_err(|_| {
            MemoryError::Alloc {
                len_bytes: layout.len_bytes(),
                align_bytes: layout.align_bytes(),
            }
        })?;
        // SAFETY: `padded_len_bytes` is never zero, so the layout has a non-zero size as
        // `alloc_zeroed` requires; the alignment is a power of two (checked by Layout).
        #[allow(unsafe_code)]
        let raw = unsafe { alloc::alloc_zeroed(std_layout) };
        let ptr = NonNull::new(raw).ok_or(MemoryError::Alloc {
            len_bytes: layout.len_bytes(),
            align_bytes: layout.align_bytes(),
        })?;
        Ok(Self {
            ptr,
            len_bytes: layout.len_bytes(),
            layout: std_layout,
        })
    }

    /// A zeroed host buffer of `len_bytes` aligned to 64 bytes.
    pub fn host(len_bytes: usize) -> Result<Self, MemoryError> {
        Self::zeroed(BufferLayout::host(len_bytes))
    }

    /// A zeroed buffer of `len_bytes` aligned to 128 bytes, for staging device copies.
    pub fn device_bound(len_bytes: usize) -> Result<Self, MemoryError> {
        Self::zeroed(BufferLayout::device_bound(len_bytes))
    }

    /// A host buffer holding a copy of `bytes`.
    pub fn copy_from(bytes: &[u8]) -> Result<Self, MemoryError> {
        let mut buf = Self::host(bytes.len())?;
        buf.as_mut_slice().copy_from_slice(bytes);
        Ok(buf)
    }

    /// The length the caller asked for, in bytes.
    pub fn len(&self) -> usize {
        self.len_bytes
    }

    /// Whether the buffer holds zero bytes.
    pub fn is_empty(&self) -> bool {
        self.len_bytes == 0
    }

    /// The alignment of the allocation in bytes.
    pub fn align_bytes(&self) -> usize {
        self.layout.align()
    }

    /// The start address, for alignment checks and FFI.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// The buffer's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` points to an initialised (zeroed, then only written through
        // `&mut self`) allocation of `layout.size() >= len_bytes` bytes that lives as long
        // as `self`.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts(self.ptr.as_ptr(), self.len_bytes)
        }
    }

    /// The buffer's bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` guarantees exclusive access.
        #[allow(unsafe_code)]
        unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len_bytes)
        }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed(self.layout)` and is deallocated
        // only here, once, with the same layout.
        #[allow(unsafe_code)]
        unsafe {
            alloc::dealloc(self.ptr.as_ptr(), self.layout)
        }
    }
}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len_bytes", &self.len_bytes)
            .field("align_bytes", &self.layout.align())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_buffers_start_on_a_64_byte_boundary() {
        for len in [0, 1, 63, 64, 65, 4096, 1 << 20] {
            let buf = AlignedBuf::host(len).unwrap();
            assert_eq!(buf.as_ptr() as usize % 64, 0, "len {len}");
            assert_eq!(buf.len(), len);
        }
    }

    #[test]
    fn device_bound_buffers_start_on_a_128_byte_boundary() {
        for len in [0, 1, 127, 128, 129, 1 << 20] {
            let buf = AlignedBuf::device_bound(len).unwrap();
            assert_eq!(buf.as_ptr() as usize % 128, 0, "len {len}");
            assert_eq!(buf.align_bytes(), 128);
        }
    }

    #[test]
    fn new_buffers_are_zeroed_and_writes_are_kept() {
        let mut buf = AlignedBuf::host(100).unwrap();
        assert!(buf.as_slice().iter().all(|b| *b == 0));
        buf.as_mut_slice()[99] = 7;
        assert_eq!(buf.as_slice()[99], 7);
        let copy = AlignedBuf::copy_from(buf.as_slice()).unwrap();
        assert_eq!(copy.as_slice(), buf.as_slice());
    }

    #[test]
    fn impossible_sizes_are_errors_not_aborts() {
        assert!(AlignedBuf::host(usize::MAX).is_err());
        assert!(AlignedBuf::host(usize::MAX / 2).is_err());
    }
}
