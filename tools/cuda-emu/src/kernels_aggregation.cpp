// Host build of kernels/cuda/aggregation.cu (the .cu file itself, included unchanged).
#include "cuda_shim.h"
#include "kernel_registry.h"

#include "aggregation.cu"

#define EMU_KERNEL_SOURCE "aggregation.cu"
EMU_KERNEL(agg_update_i64);
EMU_KERNEL(agg_update_f64);
EMU_KERNEL(agg_assign_groups_rows);
EMU_KERNEL(agg_slot_flags);
EMU_KERNEL(agg_group_rows);
EMU_KERNEL(agg_fill);
EMU_KERNEL(agg_compact_words);
