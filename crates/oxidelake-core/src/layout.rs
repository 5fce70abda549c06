//! Alignment rules for buffers on the host and on their way to a device.

use crate::EngineError;

/// Minimum alignment of every host buffer: one cache line, and the width of an
/// AVX-512 register, so vectorised kernels never split a load.
pub const HOST_ALIGN_BYTES: usize = 64;

/// Alignment of buffers bound for a device: 128 bytes is one fully coalesced
/// global-memory transaction for a warp of 32 four-byte loads.
pub const DEVICE_ALIGN_BYTES: usize = 128;

/// The size and alignment of one buffer.
///
/// The allocation is rounded up to a whole number of alignment units, so that kernels
/// can read the tail of a buffer with full-width loads without leaving the allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BufferLayout {
    len_bytes: usize,
    align_bytes: usize,
}

impl BufferLayout {
    /// A host buffer of `len_bytes` bytes aligned to [`HOST_ALIGN_BYTES`].
    pub fn host(len_bytes: usize) -> Self {
        Self {
            len_bytes,
            align_bytes: HOST_ALIGN_BYTES,
        }
    }

    /// A buffer bound for a device, aligned to [`DEVICE_ALIGN_BYTES`].
    pub fn device_bound(len_bytes: usize) -> Self {
        Self {
            len_bytes,
            align_bytes: DEVICE_ALIGN_BYTES,
        }
    }

    /// A buffer with an explicit alignment, which must be a power of two of at least
    /// [`HOST_ALIGN_BYTES`].
    pub fn with_alignment(len_bytes: usize, align_bytes: usize) -> Result<Self, EngineError> {
        if !align_bytes.is_power_of_two() || align_bytes < HOST_ALIGN_BYTES {
            return Err(EngineError::InvalidArgument {
                what: "buffer alignment",
                detail: format!(
                    "{align_bytes} is not a power of two of at least {HOST_ALIGN_BYTES} bytes"
                ),
            });
        }
        Ok(Self {
            len_bytes,
            align_bytes,
        })
    }

    /// The number of bytes the caller asked for.
    pub fn len_bytes(&self) -> usize {
        self.len_bytes
    }

    /// The alignment in bytes (a power of two).
    pub fn align_bytes(&self) -> usize {
        self.align_bytes
    }

    /// The number of bytes actually allocated: `len_bytes` rounded up to a whole number
    /// of alignment units, and never zero (a zero-sized allocation is undefined in the
    /// global allocator).
    pub fn padded_len_bytes(&self) -> Result<usize, EngineError> {
        let units = self.len_bytes.div_ceil(self.align_bytes).max(1);
        units
            .checked_mul(self.align_bytes)
            .ok_or(EngineError::InvalidArgument {
                what: "buffer length",
                detail: format!("{} bytes overflows the address space", self.len_bytes),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_length_rounds_up_to_whole_alignment_units_and_is_never_zero() {
        assert_eq!(BufferLayout::host(0).padded_len_bytes().ok(), Some(64));
        assert_eq!(BufferLayout::host(1).padded_len_bytes().ok(), Some(64));
        assert_eq!(BufferLayout::host(64).padded_len_bytes().ok(), Some(64));
        assert_eq!(BufferLayout::host(65).padded_len_bytes().ok(), Some(128));
        assert_eq!(
            BufferLayout::device_bound(129).padded_len_bytes().ok(),
            Some(256)
        );
    }

    #[test]
    fn alignment_below_a_cache_line_or_not_a_power_of_two_is_rejected() {
        assert!(BufferLayout::with_alignment(8, 32).is_err());
        assert!(BufferLayout::with_alignment(8, 96).is_err());
        assert_eq!(
            BufferLayout::with_alignment(8, 256)
                .map(|l| l.align_bytes())
                .ok(),
            Some(256)
        );
    }

    #[test]
    fn overflowing_length_is_an_error_not_a_wrap() {
        assert!(BufferLayout::host(usize::MAX).padded_len_bytes().is_err());
    }
}
