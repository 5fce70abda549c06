// Host build of kernels/cuda/vector_distance.cu (the .cu file itself, included unchanged).
#include "cuda_shim.h"
#include "kernel_registry.h"

// The kernels' `extern __shared__ float shared_q[]`: per-block dynamic shared memory.
EMU_DYNAMIC_SHARED(float, shared_q);

#include "vector_distance.cu"

#define EMU_KERNEL_SOURCE "vector_distance.cu"
EMU_KERNEL(l2_distance);
EMU_KERNEL(cosine_distance);
