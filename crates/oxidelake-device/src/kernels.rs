//! The device kernel sources embedded in the binary, named by an enum.
//!
//! Sources are real `.cu` files under `kernels/cuda/`, pulled in with `include_str!` so
//! the crate ships them (`cargo publish` packages only the crate directory). Naming each
//! one by a [`CudaKernel`] value gives the backends a small, hashable key for caching the
//! compiled module per (kernel, device), and gives CI one list to compile.

/// A CUDA source file and the entry points it defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CudaKernel {
    /// Null counting over Arrow validity bitmaps (`null_count.cu`).
    NullCount,
}

impl CudaKernel {
    /// Every embedded CUDA source; the NVRTC compile check iterates this list.
    pub const ALL: &'static [CudaKernel] = &[CudaKernel::NullCount];

    /// The source file name, e.g. `null_count.cu`.
    pub fn file_name(self) -> &'static str {
        match self {
            CudaKernel::NullCount => "null_count.cu",
        }
    }

    /// The CUDA C source text.
    pub fn source(self) -> &'static str {
        match self {
            CudaKernel::NullCount => include_str!("../kernels/cuda/null_count.cu"),
        }
    }

    /// The `extern "C" __global__` functions the source defines.
    pub fn entry_points(self) -> &'static [&'static str] {
        match self {
            CudaKernel::NullCount => &["count_unset_bits"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_is_an_extern_c_global_in_its_source() {
        for kernel in CudaKernel::ALL {
            let src = kernel.source();
            assert!(
                src.contains("extern \"C\" __global__"),
                "{}",
                kernel.file_name()
            );
            for entry in kernel.entry_points() {
                assert!(
                    src.contains(&format!("void {entry}(")),
                    "{} does not define {entry}",
                    kernel.file_name()
                );
            }
        }
    }
}
