// Host build of kernels/cuda/filter_project.cu (the .cu file itself, included unchanged).
#include "cuda_shim.h"
#include "kernel_registry.h"

#include "filter_project.cu"

#define EMU_KERNEL_SOURCE "filter_project.cu"
EMU_KERNEL(eval_predicates);
EMU_KERNEL(count_flags);
EMU_KERNEL(exclusive_scan_blocks);
EMU_KERNEL(compact_rows);
EMU_KERNEL(gather_8byte);
EMU_KERNEL(gather_bits);
EMU_KERNEL(gather_string_lengths);
EMU_KERNEL(gather_string_bytes);
EMU_KERNEL(pack_bits);
EMU_KERNEL(append_bits);
EMU_KERNEL(shift_offsets);
EMU_KERNEL(scan_blocks_u32);
EMU_KERNEL(add_block_offsets_u32);
EMU_KERNEL(eval_values);
EMU_KERNEL(widen_images);
