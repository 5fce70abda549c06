// Host build of kernels/cuda/null_count.cu (the .cu file itself, included unchanged).
#include "cuda_shim.h"
#include "kernel_registry.h"

#include "null_count.cu"

#define EMU_KERNEL_SOURCE "null_count.cu"
EMU_KERNEL(count_unset_bits);
