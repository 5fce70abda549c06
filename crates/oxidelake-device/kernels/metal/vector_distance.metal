// vector_distance.metal — L2 and cosine distance of each row of a FixedSizeList<Float32>
// column to a query vector, one SIMD-group (32 threads) per row: lanes stride over the
// row, partial sums are combined with simd_sum, and the query is staged in threadgroup
// memory. Metal has no double type, so accumulation is in float: results can differ from
// the CPU path's f64 sums in the low bits. Never compiled or run: the Metal backend
// loads no kernel and refuses every operator.
//
// Grid math: threadgroups of 32 * warps threads; row = threadgroup * warps + simdgroup,
// grid-stride over rows. Every device-memory access is bounds-checked.
#include <metal_stdlib>
using namespace metal;

kernel void vector_distance(device const float* vectors   [[buffer(0)]],
                            device const float* query     [[buffer(1)]],
                            constant uint& dim            [[buffer(2)]],
                            constant ulong& rows          [[buffer(3)]],
                            constant uint& metric         [[buffer(4)]],  // 0 = L2, 1 = cosine
                            device float* out             [[buffer(5)]],
                            device uchar* out_valid       [[buffer(6)]],
                            threadgroup float* shared_q   [[threadgroup(0)]],
                            uint tid   [[thread_position_in_threadgroup]],
                            uint tsize [[threads_per_threadgroup]],
                            uint group [[threadgroup_position_in_grid]],
                            uint groups [[threadgroups_per_grid]],
                            uint lane  [[thread_index_in_simdgroup]],
                            uint simd  [[simdgroup_index_in_threadgroup]]) {
    for (uint k = tid; k < dim; k += tsize) { shared_q[k] = query[k]; }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const ulong warps = tsize / 32;
    for (ulong row = ulong(group) * warps + simd; row < rows; row += ulong(groups) * warps) {
        device const float* v = vectors + row * dim;
        float a = 0.0f, b = 0.0f, c = 0.0f;
        for (uint k = lane; k < dim; k += 32) {
            const float x = v[k];
            const float q = shared_q[k];
            if (metric == 0) {
                const float d = x - q;
                a += d * d;
            } else {
                a += x * q;
                b += x * x;
                c += q * q;
            }
        }
        a = simd_sum(a);
        b = simd_sum(b);
        c = simd_sum(c);
        if (lane == 0) {
            if (metric == 0) {
                out[row] = sqrt(a);
                out_valid[row] = 1;
            } else {
                const bool valid = b != 0.0f && c != 0.0f;
                out[row] = valid ? 1.0f - a / (sqrt(b) * sqrt(c)) : 0.0f;
                out_valid[row] = valid ? 1 : 0;
            }
        }
    }
}
