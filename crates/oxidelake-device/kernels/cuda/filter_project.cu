// filter_project.cu — fused filter + projection with stream compaction.
//
// Pipeline for one batch of `rows` rows (all launches on one stream):
//   1. eval_predicates      one thread per row: flag = AND of every (column op literal);
//                           a NULL input makes the comparison false (SQL: not true).
//   2. count_flags          per-block count of set flags            -> block_counts[]
//   3. exclusive_scan_blocks  one block scans block_counts in place -> block_offsets[]
//   4. compact_rows         per-block scan of flags (shared memory), writes the indices of
//                           kept rows in input order                -> out_rows[]
//   5. gather_8byte         per projected Int64/Float64 column: values[out_rows[i]] and
//                           its validity bit, into a dense output column.
//
// Floats compare in IEEE total order (NaN above +inf, -0.0 below +0.0), exactly as
// Arrow's comparison kernels do on the CPU path.
//
// Grid math: kernels 1, 2, 4 and 5 use a 1-D grid of ceil(rows / blockDim.x) blocks;
// blockDim.x must equal FP_BLOCK (256) for kernels 2 and 4 (shared-memory scan). Kernel 3
// runs as a single block of FP_BLOCK threads for any number of blocks. Every global
// access is guarded by an index bound.

#define FP_BLOCK 256

// Predicate operators and column types, matching oxidelake_device::ops.
#define OP_EQ 0
#define OP_LT 1
#define OP_LE 2
#define OP_GT 3
#define OP_GE 4
#define TY_I64 0
#define TY_F64 1

__device__ __forceinline__ long long total_order_key(long long bits)
{
    // Maps IEEE-754 bit patterns to integers ordered like f64::total_cmp.
    return bits ^ (long long)(((unsigned long long)(bits >> 63)) >> 1);
}

__device__ __forceinline__ bool bit_is_set(const unsigned char* bitmap, unsigned long long i)
{
    return bitmap == 0 || ((bitmap[i >> 3] >> (i & 7ull)) & 1u);
}

__device__ __forceinline__ bool compare(long long lhs, long long rhs, int op)
{
    switch (op) {
    case OP_EQ: return lhs == rhs;
    case OP_LT: return lhs < rhs;
    case OP_LE: return lhs <= rhs;
    case OP_GT: return lhs > rhs;
    case OP_GE: return lhs >= rhs;
    default: return false;
    }
}

// col_ptrs[p]: device address of predicate p's 8-byte values; valid_ptrs[p]: its validity
// bitmap (0 = no nulls); literals[p]: the literal's bits (i64 or f64 bit pattern).
extern "C" __global__ void eval_predicates(const unsigned long long* __restrict__ col_ptrs,
                                           const unsigned long long* __restrict__ valid_ptrs,
                                           const int* __restrict__ ops,
                                           const int* __restrict__ types,
                                           const long long* __restrict__ literals,
                                           int num_preds,
                                           unsigned long long rows,
                                           unsigned char* __restrict__ flags)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    bool keep = true;
    for (int p = 0; p < num_preds && keep; ++p) {
        const long long* values = (const long long*)col_ptrs[p];
        const unsigned char* valid = (const unsigned char*)valid_ptrs[p];
        if (!bit_is_set(valid, row)) {
            keep = false;
            break;
        }
        long long lhs = values[row];
        long long rhs = literals[p];
        if (types[p] == TY_F64) {
            lhs = total_order_key(lhs);
            rhs = total_order_key(rhs);
        }
        keep = compare(lhs, rhs, ops[p]);
    }
    flags[row] = keep ? 1 : 0;
}

__device__ unsigned int block_exclusive_scan(unsigned int value, unsigned int* shared, unsigned int* total)
{
    const unsigned int t = threadIdx.x;
    shared[t] = value;
    __syncthreads();
    // Hillis-Steele inclusive scan over FP_BLOCK entries.
    for (unsigned int offset = 1; offset < FP_BLOCK; offset <<= 1) {
        unsigned int add = (t >= offset) ? shared[t - offset] : 0u;
        __syncthreads();
        shared[t] += add;
        __syncthreads();
    }
    *total = shared[FP_BLOCK - 1];
    return shared[t] - value;
}

extern "C" __global__ void count_flags(const unsigned char* __restrict__ flags,
                                       unsigned long long rows,
                                       unsigned int* __restrict__ block_counts,
                                       unsigned int num_blocks)
{
    __shared__ unsigned int shared[FP_BLOCK];
    const unsigned long long row = (unsigned long long)blockIdx.x * FP_BLOCK + threadIdx.x;
    const unsigned int flag = (row < rows) ? flags[row] : 0u;
    unsigned int total;
    block_exclusive_scan(flag, shared, &total);
    if (threadIdx.x == 0 && blockIdx.x < num_blocks) {
        block_counts[blockIdx.x] = total;
    }
}

// Single block: exclusive scan of num_blocks counts, in chunks of FP_BLOCK; writes the
// grand total to block_counts[num_blocks] (the array has num_blocks + 1 entries).
extern "C" __global__ void exclusive_scan_blocks(unsigned int* __restrict__ block_counts,
                                                 unsigned int num_blocks)
{
    __shared__ unsigned int shared[FP_BLOCK];
    unsigned int carry = 0;
    for (unsigned int base = 0; base < num_blocks; base += FP_BLOCK) {
        const unsigned int i = base + threadIdx.x;
        const unsigned int value = (i < num_blocks) ? block_counts[i] : 0u;
        unsigned int total;
        const unsigned int prefix = block_exclusive_scan(value, shared, &total);
        if (i < num_blocks) {
            block_counts[i] = carry + prefix;
        }
        carry += total;
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        block_counts[num_blocks] = carry;
    }
}

extern "C" __global__ void compact_rows(const unsigned char* __restrict__ flags,
                                        unsigned long long rows,
                                        const unsigned int* __restrict__ block_offsets,
                                        unsigned int num_blocks,
                                        unsigned int* __restrict__ out_rows,
                                        unsigned long long out_capacity)
{
    __shared__ unsigned int shared[FP_BLOCK];
    const unsigned long long row = (unsigned long long)blockIdx.x * FP_BLOCK + threadIdx.x;
    const unsigned int flag = (row < rows) ? flags[row] : 0u;
    unsigned int total;
    const unsigned int prefix = block_exclusive_scan(flag, shared, &total);
    if (flag && blockIdx.x < num_blocks) {
        const unsigned long long dst = (unsigned long long)block_offsets[blockIdx.x] + prefix;
        if (dst < out_capacity) {
            out_rows[dst] = (unsigned int)row;
        }
    }
}

// Gathers 8-byte values and validity for the kept rows; out_valid is one byte per row
// (the host packs it into an Arrow bitmap).
extern "C" __global__ void gather_8byte(const long long* __restrict__ values,
                                        const unsigned char* __restrict__ valid,
                                        unsigned long long in_rows,
                                        const unsigned int* __restrict__ rows_kept,
                                        unsigned long long out_rows,
                                        long long* __restrict__ out_values,
                                        unsigned char* __restrict__ out_valid)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= out_rows) {
        return;
    }
    const unsigned long long src = rows_kept[i];
    if (src >= in_rows) {
        out_valid[i] = 0;
        out_values[i] = 0;
        return;
    }
    out_values[i] = values[src];
    out_valid[i] = bit_is_set(valid, src) ? 1 : 0;
}
