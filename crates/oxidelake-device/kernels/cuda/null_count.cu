// null_count.cu — count the unset bits (nulls) of an Arrow validity bitmap slice.
//
// Used to check, on the device side of a host->device copy, the same null count the host
// computed before the copy (a copy that dropped or shifted bytes shows up as a mismatch).
//
// Grid math: any 1-D grid; a grid-stride loop covers len_bits. blockDim.x must be a
// multiple of 32 because every lane of a warp takes part in the shuffle reduction.
// Bounds: every global read is guarded by `byte < bitmap_bytes`; the single global write
// is an atomicAdd by lane 0 of each warp.

extern "C" __global__ void count_unset_bits(const unsigned char* __restrict__ bitmap,
                                            unsigned long long bitmap_bytes,
                                            unsigned long long offset_bits,
                                            unsigned long long len_bits,
                                            unsigned long long* __restrict__ out_nulls)
{
    const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
    unsigned long long local = 0ull;
    for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
         i < len_bits;
         i += stride) {
        const unsigned long long bit = offset_bits + i;
        const unsigned long long byte = bit >> 3;
        if (byte < bitmap_bytes) {
            local += ((bitmap[byte] >> (bit & 7ull)) & 1u) ? 0ull : 1ull;
        }
    }
    for (int delta = 16; delta > 0; delta >>= 1) {
        local += __shfl_down_sync(0xffffffffu, local, delta);
    }
    if ((threadIdx.x & 31u) == 0u && local != 0ull) {
        atomicAdd(out_nulls, local);
    }
}
