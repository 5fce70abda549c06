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
    /// Fused filter + projection with stream compaction (`filter_project.cu`).
    FilterProject,
    /// Open-addressing hash join, atomic-CAS build and parallel probe (`hash_join.cu`).
    HashJoin,
    /// Grouped SUM/COUNT/MIN/MAX with atomics (`aggregation.cu`).
    Aggregation,
    /// L2 and cosine distance, warp per row (`vector_distance.cu`).
    VectorDistance,
}

impl CudaKernel {
    /// Every embedded CUDA source; the NVRTC compile check iterates this list.
    pub const ALL: &'static [CudaKernel] = &[
        CudaKernel::NullCount,
        CudaKernel::FilterProject,
        CudaKernel::HashJoin,
        CudaKernel::Aggregation,
        CudaKernel::VectorDistance,
    ];

    /// The source file name, e.g. `null_count.cu`.
    pub fn file_name(self) -> &'static str {
        match self {
            CudaKernel::NullCount => "null_count.cu",
            CudaKernel::FilterProject => "filter_project.cu",
            CudaKernel::HashJoin => "hash_join.cu",
            CudaKernel::Aggregation => "aggregation.cu",
            CudaKernel::VectorDistance => "vector_distance.cu",
        }
    }

    /// The CUDA C source text.
    pub fn source(self) -> &'static str {
        match self {
            CudaKernel::NullCount => include_str!("../kernels/cuda/null_count.cu"),
            CudaKernel::FilterProject => include_str!("../kernels/cuda/filter_project.cu"),
            CudaKernel::HashJoin => include_str!("../kernels/cuda/hash_join.cu"),
            CudaKernel::Aggregation => include_str!("../kernels/cuda/aggregation.cu"),
            CudaKernel::VectorDistance => include_str!("../kernels/cuda/vector_distance.cu"),
        }
    }

    /// The `extern "C" __global__` functions the source defines.
    pub fn entry_points(self) -> &'static [&'static str] {
        match self {
            CudaKernel::NullCount => &["count_unset_bits"],
            CudaKernel::FilterProject => &[
                "eval_predicates",
                "count_flags",
                "exclusive_scan_blocks",
                "scan_blocks_u32",
                "add_block_offsets_u32",
                "compact_rows",
                "gather_8byte",
                "gather_bits",
                "gather_string_lengths",
                "gather_string_bytes",
                "pack_bits",
                "append_bits",
                "shift_offsets",
                "eval_values",
                "widen_images",
            ],
            CudaKernel::HashJoin => &[
                "join_build",
                "join_probe_count",
                "join_scan_counts",
                "join_scan_totals",
                "join_add_block_offsets",
                "join_probe_write",
                "join_match_flags",
                "join_radix_keys",
                "join_row_images",
            ],
            CudaKernel::Aggregation => &["agg_update_i64", "agg_update_f64"],
            CudaKernel::VectorDistance => &["l2_distance", "cosine_distance"],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cuda_kernel_bounds_checks_its_thread_index() {
        for kernel in CudaKernel::ALL {
            let src = kernel.source();
            assert!(
                src.contains("Grid math"),
                "{} documents no grid math",
                kernel.file_name()
            );
            assert!(
                src.contains(">= rows") || src.contains("< rows") || src.contains("< len_bits"),
                "{} has no row bound",
                kernel.file_name()
            );
        }
    }

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
