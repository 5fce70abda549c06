// vector_distance.cu — L2 and cosine distance between each row of a FixedSizeList<Float32>
// column and one query vector.
//
// One warp per row: the 32 lanes stride over the row's `dim` elements, accumulate in
// double, and combine with warp shuffles. The query vector is staged once per block in
// shared memory (dynamic shared memory of dim * sizeof(float) bytes), so each row reads
// only its own elements from global memory.
//
// Grid math: blockDim.x is a multiple of 32 (warps_per_block = blockDim.x / 32); a
// grid-stride loop over rows in steps of gridDim.x * warps_per_block covers any number of
// rows. Bounds: every element read is guarded by `row < rows` and `k < dim`.
//
// Row validity (row_valid, one bit per row, may be null) marks NULL rows; out_valid gets
// one byte per row: 0 for a NULL row, and for cosine also when either norm is zero
// (matching DataFusion's cosine_distance, which returns NULL there).
//
// Results are summed in a different order than the CPU's sequential loop, so they can
// differ from it in the last bits.

__device__ __forceinline__ double warp_sum(double v)
{
    for (int delta = 16; delta > 0; delta >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, delta);
    }
    return v;
}

__device__ __forceinline__ bool row_is_valid(const unsigned char* bitmap, unsigned long long i)
{
    return bitmap == 0 || ((bitmap[i >> 3] >> (i & 7ull)) & 1u);
}

__device__ void stage_query(const float* __restrict__ query, int dim, float* shared_q)
{
    for (int k = threadIdx.x; k < dim; k += blockDim.x) {
        shared_q[k] = query[k];
    }
    __syncthreads();
}

extern "C" __global__ void l2_distance(const float* __restrict__ vectors,
                                       const unsigned char* __restrict__ row_valid,
                                       const float* __restrict__ query,
                                       int dim,
                                       unsigned long long rows,
                                       double* __restrict__ out,
                                       unsigned char* __restrict__ out_valid)
{
    extern __shared__ float shared_q[];
    stage_query(query, dim, shared_q);
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned long long warps_per_block = blockDim.x >> 5;
    const unsigned long long warp = (unsigned long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const unsigned long long stride = (unsigned long long)gridDim.x * warps_per_block;
    for (unsigned long long row = warp; row < rows; row += stride) {
        const float* v = vectors + row * (unsigned long long)dim;
        double acc = 0.0;
        for (int k = lane; k < dim; k += 32) {
            const double d = (double)v[k] - (double)shared_q[k];
            acc += d * d;
        }
        acc = warp_sum(acc);
        if (lane == 0) {
            const bool valid = row_is_valid(row_valid, row);
            out[row] = valid ? sqrt(acc) : 0.0;
            out_valid[row] = valid ? 1 : 0;
        }
    }
}

extern "C" __global__ void cosine_distance(const float* __restrict__ vectors,
                                           const unsigned char* __restrict__ row_valid,
                                           const float* __restrict__ query,
                                           int dim,
                                           unsigned long long rows,
                                           double* __restrict__ out,
                                           unsigned char* __restrict__ out_valid)
{
    extern __shared__ float shared_q[];
    stage_query(query, dim, shared_q);
    const unsigned int lane = threadIdx.x & 31u;
    const unsigned long long warps_per_block = blockDim.x >> 5;
    const unsigned long long warp = (unsigned long long)blockIdx.x * warps_per_block + (threadIdx.x >> 5);
    const unsigned long long stride = (unsigned long long)gridDim.x * warps_per_block;
    for (unsigned long long row = warp; row < rows; row += stride) {
        const float* v = vectors + row * (unsigned long long)dim;
        double dot = 0.0, sq_v = 0.0, sq_q = 0.0;
        for (int k = lane; k < dim; k += 32) {
            const double a = (double)v[k];
            const double q = (double)shared_q[k];
            dot += a * q;
            sq_v += a * a;
            sq_q += q * q;
        }
        dot = warp_sum(dot);
        sq_v = warp_sum(sq_v);
        sq_q = warp_sum(sq_q);
        if (lane == 0) {
            const bool valid = row_is_valid(row_valid, row) && sq_v != 0.0 && sq_q != 0.0;
            out[row] = valid ? 1.0 - dot / (sqrt(sq_v) * sqrt(sq_q)) : 0.0;
            out_valid[row] = valid ? 1 : 0;
        }
    }
}
