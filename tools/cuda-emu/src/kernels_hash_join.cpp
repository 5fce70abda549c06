// Host build of kernels/cuda/hash_join.cu (the .cu file itself, included unchanged).
#include "cuda_shim.h"
#include "kernel_registry.h"

#include "hash_join.cu"

#define EMU_KERNEL_SOURCE "hash_join.cu"
EMU_KERNEL(join_build);
EMU_KERNEL(join_probe_count);
EMU_KERNEL(join_probe_write);
EMU_KERNEL(join_match_flags);
EMU_KERNEL(join_scan_counts);
EMU_KERNEL(join_scan_totals);
EMU_KERNEL(join_add_block_offsets);
EMU_KERNEL(join_radix_keys);
EMU_KERNEL(join_row_images);
