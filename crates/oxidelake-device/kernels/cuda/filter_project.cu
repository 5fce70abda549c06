// filter_project.cu — fused filter + projection with stream compaction.
//
// Pipeline for one batch of `rows` rows (all launches on one stream):
//   1. eval_predicates      one thread per row: runs the predicate program (comparisons,
//                           IS NULL, AND/OR/NOT in three-valued logic); flag = result
//                           is true (NULL and false drop the row, as in SQL).
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
#define OP_NE 5
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
    case OP_NE: return lhs != rhs;
    default: return false;
    }
}

// A predicate arrives as a postfix program (oxidelake_device::ops::DeviceProgram): per
// instruction an opcode, the slot it reads, an argument (comparison code, or 1 for IS NOT
// NULL) and a literal image. One thread per row runs it over a stack of three-valued
// results (0 false, 1 true, 2 NULL) and keeps the row when the one result left is true.
// Slots are 8-byte images of the columns: integer-like values widened to i64, floats
// widened to f64 (slot_types[s] == TY_F64, compared in total order).
#define I_CMP 0
#define I_IS_NULL 1
#define I_AND 2
#define I_OR 3
#define I_NOT 4
#define I_CMP_SLOTS 5
#define I_CMP_STR 6
#define I_LIKE 7
#define TY_STR 2
#define V_FALSE 0
#define V_TRUE 1
#define V_NULL 2
#define MAX_STACK 32

__device__ __forceinline__ unsigned char kleene(bool is_and, unsigned char a, unsigned char b)
{
    const unsigned char dominant = is_and ? V_FALSE : V_TRUE;
    if (a == dominant || b == dominant) {
        return dominant;
    }
    if (a == V_NULL || b == V_NULL) {
        return V_NULL;
    }
    return is_and ? V_TRUE : V_FALSE;
}

// Three-way comparison of two byte strings (Arrow orders strings by their bytes).
__device__ int compare_bytes(const unsigned char* a, int alen, const unsigned char* b, int blen)
{
    const int n = alen < blen ? alen : blen;
    for (int i = 0; i < n; ++i) {
        if (a[i] != b[i]) {
            return a[i] < b[i] ? -1 : 1;
        }
    }
    return alen < blen ? -1 : (alen > blen ? 1 : 0);
}

__device__ __forceinline__ bool order_holds(int c, int op)
{
    return compare((long long)c, 0ll, op);
}

// s LIKE p for a pattern whose only wildcard is '%': the first segment is a prefix, the
// last a suffix, the ones between are found leftmost-first, in order, between them
// (oxidelake_device::ops::like_percent is the same algorithm on the host).
__device__ bool like_percent(const unsigned char* s, int n, const unsigned char* p, int m)
{
    int first = 0;
    while (first < m && p[first] != '%') {
        ++first;
    }
    if (first == m) {
        return compare_bytes(s, n, p, m) == 0;
    }
    int last = m - 1;
    while (p[last] != '%') {
        --last;
    }
    const int suffix = m - last - 1;
    if (first + suffix > n) {
        return false;
    }
    for (int t = 0; t < first; ++t) {
        if (s[t] != p[t]) {
            return false;
        }
    }
    const int end = n - suffix;
    for (int t = 0; t < suffix; ++t) {
        if (s[end + t] != p[last + 1 + t]) {
            return false;
        }
    }
    int pos = first;
    int k = first + 1;
    while (k < last) {
        int e = k;
        while (e < last && p[e] != '%') {
            ++e;
        }
        const int len = e - k;
        if (len > 0) {
            int found = -1;
            for (int start = pos; start + len <= end && found < 0; ++start) {
                int t = 0;
                while (t < len && s[start + t] == p[k + t]) {
                    ++t;
                }
                if (t == len) {
                    found = start;
                }
            }
            if (found < 0) {
                return false;
            }
            pos = found + len;
        }
        k = e + 1;
    }
    return true;
}

// Per slot s: col_ptrs[s] the 8-byte images of a number slot; off_ptrs[s] (chunk-relative
// int offsets, rows + 1) and byte_ptrs[s] the values of a string slot; valid_ptrs[s] its
// validity bitmap (0 = no nulls). pool / pool_offsets: the program's string literals.
extern "C" __global__ void eval_predicates(const unsigned long long* __restrict__ col_ptrs,
                                           const unsigned long long* __restrict__ off_ptrs,
                                           const unsigned long long* __restrict__ byte_ptrs,
                                           const unsigned long long* __restrict__ valid_ptrs,
                                           const unsigned char* __restrict__ pool,
                                           const int* __restrict__ pool_offsets,
                                           const int* __restrict__ slot_types,
                                           const int* __restrict__ codes,
                                           const int* __restrict__ slots,
                                           const int* __restrict__ args,
                                           const long long* __restrict__ literals,
                                           int num_instrs,
                                           unsigned long long rows,
                                           unsigned char* __restrict__ flags)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    unsigned char stack[MAX_STACK];
    int top = 0;
    for (int i = 0; i < num_instrs; ++i) {
        const int code = codes[i];
        if (code == I_CMP_STR || code == I_LIKE) {
            if (top >= MAX_STACK) {
                flags[row] = 0;
                return;
            }
            const int s = slots[i];
            if (!bit_is_set((const unsigned char*)valid_ptrs[s], row)) {
                stack[top++] = V_NULL;
                continue;
            }
            const int* offsets = (const int*)off_ptrs[s];
            const unsigned char* bytes = (const unsigned char*)byte_ptrs[s] + offsets[row];
            const int len = offsets[row + 1] - offsets[row];
            const int lit = (int)literals[i];
            const unsigned char* text = pool + pool_offsets[lit];
            const int text_len = pool_offsets[lit + 1] - pool_offsets[lit];
            bool holds;
            if (code == I_CMP_STR) {
                holds = order_holds(compare_bytes(bytes, len, text, text_len), args[i]);
            } else {
                holds = like_percent(bytes, len, text, text_len) != (args[i] != 0);
            }
            stack[top++] = holds ? V_TRUE : V_FALSE;
        } else if (code == I_CMP || code == I_IS_NULL || code == I_CMP_SLOTS) {
            if (top >= MAX_STACK) {
                flags[row] = 0;
                return;
            }
            const int s = slots[i];
            // I_CMP_SLOTS compares with another slot, whose index is the literal.
            const int o = (code == I_CMP_SLOTS) ? (int)literals[i] : s;
            const bool valid = bit_is_set((const unsigned char*)valid_ptrs[s], row) &&
                               bit_is_set((const unsigned char*)valid_ptrs[o], row);
            if (code == I_IS_NULL) {
                stack[top++] = (valid == (args[i] != 0)) ? V_TRUE : V_FALSE;
            } else if (!valid) {
                stack[top++] = V_NULL;
            } else {
                long long lhs = ((const long long*)col_ptrs[s])[row];
                long long rhs = (code == I_CMP_SLOTS) ? ((const long long*)col_ptrs[o])[row] : literals[i];
                if (slot_types[s] == TY_F64) {
                    lhs = total_order_key(lhs);
                    rhs = total_order_key(rhs);
                }
                stack[top++] = compare(lhs, rhs, args[i]) ? V_TRUE : V_FALSE;
            }
        } else if (code == I_NOT) {
            if (top < 1) {
                flags[row] = 0;
                return;
            }
            const unsigned char v = stack[top - 1];
            stack[top - 1] = (v == V_NULL) ? V_NULL : (unsigned char)(V_TRUE - v);
        } else {
            if (top < 2) {
                flags[row] = 0;
                return;
            }
            const unsigned char b = stack[--top];
            stack[top - 1] = kleene(code == I_AND, stack[top - 1], b);
        }
    }
    flags[row] = (top == 1 && stack[0] == V_TRUE) ? 1 : 0;
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
