// filter_project.metal — predicate evaluation for the fused filter + projection on
// Apple GPUs. Unified memory means the columns are read in place; the kept-row indices
// are compacted with a threadgroup prefix sum, mirroring filter_project.cu.
//
// Grid math: one thread per row (dispatchThreads over `rows`); threadgroup size 256 for
// the compaction kernels. Every device-memory access is bounds-checked.
#include <metal_stdlib>
using namespace metal;

constant int OP_EQ = 0;
constant int OP_LT = 1;
constant int OP_LE = 2;
constant int OP_GT = 3;
constant int OP_GE = 4;
constant int TY_F64_AS_BITS = 1;

// -0.0 takes +0.0's bits, then IEEE total order: DataFusion's float comparison, as
// float_order_key in filter_project.cu.
inline long total_order_key(long bits) {
    if ((ulong(bits) << 1) == 0) {
        bits = 0;
    }
    return bits ^ long(ulong(bits >> 63) >> 1);
}

inline bool bit_is_set(device const uchar* bitmap, ulong i, bool has_bitmap) {
    return !has_bitmap || ((bitmap[i >> 3] >> (i & 7)) & 1);
}

inline bool cmp(long l, long r, int op) {
    switch (op) {
        case OP_EQ: return l == r;
        case OP_LT: return l < r;
        case OP_LE: return l <= r;
        case OP_GT: return l > r;
        case OP_GE: return l >= r;
        default: return false;
    }
}

// One predicate pass: flags[row] &= (column[row] op literal). The host runs it once per
// predicate after filling flags with 1. Float64 columns are passed as their bit patterns
// (Metal has no double type) and compared through the total-order integer image.
kernel void eval_predicate(device const long* values      [[buffer(0)]],
                           device const uchar* validity   [[buffer(1)]],
                           constant long& literal         [[buffer(2)]],
                           constant int& op               [[buffer(3)]],
                           constant int& type             [[buffer(4)]],
                           constant bool& has_validity    [[buffer(5)]],
                           constant ulong& rows           [[buffer(6)]],
                           device uchar* flags            [[buffer(7)]],
                           uint gid [[thread_position_in_grid]]) {
    if (gid >= rows) { return; }
    if (!bit_is_set(validity, gid, has_validity)) { flags[gid] = 0; return; }
    long l = values[gid];
    long r = literal;
    if (type == TY_F64_AS_BITS) { l = total_order_key(l); r = total_order_key(r); }
    flags[gid] = flags[gid] & (cmp(l, r, op) ? 1 : 0);
}

// Writes the indices of kept rows in input order. block_offsets[g] is the number of kept
// rows before threadgroup g (computed by a first pass over per-group counts).
kernel void compact_rows(device const uchar* flags          [[buffer(0)]],
                         constant ulong& rows               [[buffer(1)]],
                         device const uint* block_offsets   [[buffer(2)]],
                         device uint* out_rows              [[buffer(3)]],
                         constant ulong& out_capacity       [[buffer(4)]],
                         uint gid [[thread_position_in_grid]],
                         uint tid [[thread_position_in_threadgroup]],
                         uint group [[threadgroup_position_in_grid]]) {
    threadgroup uint scan[256];
    uint flag = (gid < rows) ? flags[gid] : 0;
    scan[tid] = flag;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    for (uint offset = 1; offset < 256; offset <<= 1) {
        uint add = (tid >= offset) ? scan[tid - offset] : 0;
        threadgroup_barrier(mem_flags::mem_threadgroup);
        scan[tid] += add;
        threadgroup_barrier(mem_flags::mem_threadgroup);
    }
    if (flag) {
        ulong dst = ulong(block_offsets[group]) + scan[tid] - flag;
        if (dst < out_capacity) { out_rows[dst] = gid; }
    }
}
