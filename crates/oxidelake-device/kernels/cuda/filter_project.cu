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
// Also here: the device-batch gathers and appends (below), the computed columns'
// eval_values, and widen_images, which widens an upload's narrow images in place.
//
// Floats compare as DataFusion compares them: -0.0 equals +0.0, otherwise IEEE total
// order (NaN above +inf, a negative NaN below -inf), exactly as the CPU path does (Arrow's
// total-order kernels on columns whose -0.0s were made +0.0).
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

__device__ __forceinline__ long long float_order_key(long long bits)
{
    // -0.0 takes +0.0's bits (only the two zeros have nothing set but the sign bit), then
    // the bits map to integers ordered like f64::total_cmp: oxidelake_device's
    // predicate::float_order_key, the host reference.
    if ((((unsigned long long)bits) << 1) == 0ull) {
        bits = 0;
    }
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
// widened to f64 (slot_types[s] == TY_F64, compared through float_order_key).
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

// Per slot s: col_ptrs[s] the 8-byte images of a number slot; off_ptrs[s] (int offsets from
// 0, rows + 1) and byte_ptrs[s] the values of a string slot; valid_ptrs[s] its
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
                    lhs = float_order_key(lhs);
                    rhs = float_order_key(rhs);
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

// A scan of any length across the grid, in three launches (a string column's gathered
// lengths into its offsets, ADR-0014): scan_blocks_u32 scans each block's values in
// place and writes the block's total; exclusive_scan_blocks scans the totals (one
// block); add_block_offsets_u32 adds each block's offset and writes the grand total at
// values[n]. The grid of the first and last is ceil((n + 1) / FP_BLOCK) blocks of
// FP_BLOCK threads; block_totals holds that many + 1 entries.
extern "C" __global__ void scan_blocks_u32(unsigned int* __restrict__ values,
                                           unsigned int n,
                                           unsigned int* __restrict__ block_totals)
{
    __shared__ unsigned int shared[FP_BLOCK];
    const unsigned long long i = (unsigned long long)blockIdx.x * FP_BLOCK + threadIdx.x;
    const unsigned int value = (i < n) ? values[i] : 0u;
    unsigned int total;
    const unsigned int prefix = block_exclusive_scan(value, shared, &total);
    if (i < n) {
        values[i] = prefix;
    }
    if (threadIdx.x == 0) {
        block_totals[blockIdx.x] = total;
    }
}

extern "C" __global__ void add_block_offsets_u32(unsigned int* __restrict__ values,
                                                 unsigned int n,
                                                 const unsigned int* __restrict__ block_offsets,
                                                 unsigned int num_blocks)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * FP_BLOCK + threadIdx.x;
    if (i < n) {
        values[i] += block_offsets[blockIdx.x];
    } else if (i == n) {
        values[n] = block_offsets[num_blocks];
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

// ---------------------------------------------------------------------------------------
// Gathers into a device-resident batch (ADR-0014): the kept rows' validity as a bitmap,
// and their strings (lengths, an exclusive_scan_blocks over them, then the bytes). Same
// 1-D grids and index bounds as above; a row index at or beyond in_rows reads as NULL
// (bits) or as an empty string.

// One thread per output byte: the validity bits of 8 kept rows, bit 0 = output row 0.
// A null `valid` means the input has no NULLs.
extern "C" __global__ void gather_bits(const unsigned char* __restrict__ valid,
                                       unsigned long long in_rows,
                                       const unsigned int* __restrict__ rows_kept,
                                       unsigned long long out_rows,
                                       unsigned char* __restrict__ out_bits)
{
    const unsigned long long byte = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long first = byte * 8ull;
    if (first >= out_rows) {
        return;
    }
    unsigned int packed = 0;
    for (unsigned int j = 0; j < 8u; ++j) {
        const unsigned long long i = first + j;
        if (i >= out_rows) {
            break;
        }
        const unsigned long long src = rows_kept[i];
        if (src < in_rows && bit_is_set(valid, src)) {
            packed |= 1u << j;
        }
    }
    out_bits[byte] = (unsigned char)packed;
}

// One thread per kept row: the byte length of its string (offsets from 0, in_rows + 1).
extern "C" __global__ void gather_string_lengths(const int* __restrict__ offsets,
                                                 unsigned long long in_rows,
                                                 const unsigned int* __restrict__ rows_kept,
                                                 unsigned long long out_rows,
                                                 unsigned int* __restrict__ lengths)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= out_rows) {
        return;
    }
    const unsigned long long src = rows_kept[i];
    lengths[i] = (src < in_rows) ? (unsigned int)(offsets[src + 1] - offsets[src]) : 0u;
}

// One thread per kept row: writes its output offset from the scanned lengths (`starts`,
// out_rows + 1 entries; thread 0 also writes the end) and copies its bytes there.
extern "C" __global__ void gather_string_bytes(const int* __restrict__ offsets,
                                               const unsigned char* __restrict__ bytes,
                                               unsigned long long in_rows,
                                               const unsigned int* __restrict__ rows_kept,
                                               const unsigned int* __restrict__ starts,
                                               unsigned long long out_rows,
                                               int* __restrict__ out_offsets,
                                               unsigned char* __restrict__ out_bytes)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= out_rows) {
        return;
    }
    const unsigned int start = starts[i];
    out_offsets[i] = (int)start;
    if (i == 0) {
        out_offsets[out_rows] = (int)starts[out_rows];
    }
    const unsigned long long src = rows_kept[i];
    if (src >= in_rows) {
        return;
    }
    const int from = offsets[src];
    const int len = offsets[src + 1] - from;
    for (int k = 0; k < len; ++k) {
        out_bytes[start + (unsigned int)k] = bytes[from + k];
    }
}

// One thread per output byte: packs 8 one-byte flags (non-zero = set) into a bitmap, bit
// 0 = row 0; the bits past `rows` in the last byte are 0. Turns eval_values' validity
// bytes into a device-resident batch's validity bitmap.
extern "C" __global__ void pack_bits(const unsigned char* __restrict__ flags,
                                     unsigned long long rows,
                                     unsigned char* __restrict__ out_bits)
{
    const unsigned long long byte = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long first = byte * 8ull;
    if (first >= rows) {
        return;
    }
    unsigned int packed = 0;
    for (unsigned int j = 0; j < 8u && first + j < rows; ++j) {
        if (flags[first + j] != 0) {
            packed |= 1u << j;
        }
    }
    out_bits[byte] = (unsigned char)packed;
}

// ---------------------------------------------------------------------------------------
// Appending one device-resident batch to another (ADR-0014: a join's build side gathered
// into one batch on the device). Images and string bytes are plain device copies; these
// two kernels do what a copy cannot.

// One thread per output byte that bits [at, at + rows) touch: sets those bits to the
// `rows` validity bits of `valid` (all set when `valid` is null), keeping the other bits
// of the first and last byte, which belong to the batches before and after. Launches on
// one stream run in order, so the byte two appends share is never written concurrently.
extern "C" __global__ void append_bits(const unsigned char* __restrict__ valid,
                                       unsigned long long rows,
                                       unsigned char* __restrict__ out_bits,
                                       unsigned long long at)
{
    if (rows == 0) {
        return;
    }
    const unsigned long long byte = at / 8ull + (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (byte > (at + rows - 1ull) / 8ull) {
        return;
    }
    unsigned int packed = out_bits[byte];
    for (unsigned int j = 0; j < 8u; ++j) {
        const unsigned long long bit = byte * 8ull + j;
        if (bit < at || bit >= at + rows) {
            continue;
        }
        if (bit_is_set(valid, bit - at)) {
            packed |= 1u << j;
        } else {
            packed &= ~(1u << j);
        }
    }
    out_bits[byte] = (unsigned char)packed;
}

// One thread per entry: the `n` string offsets of a batch (from 0) moved up by `base`,
// the byte where its strings start in the appended-to batch.
extern "C" __global__ void shift_offsets(const int* __restrict__ offsets,
                                         unsigned long long n,
                                         int base,
                                         int* __restrict__ out_offsets)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    out_offsets[i] = offsets[i] + base;
}

// ---------------------------------------------------------------------------------------
// eval_values: computed columns (oxidelake_device::ops::ValueProgram). One thread per row
// runs a postfix program over a stack of (image, valid) pairs: integer-like images as
// i64, floats as f64 bits. Arithmetic modes: M_WRAP wraps (integer SQL types), M_CHECKED
// is exact and raises *overflow when a non-NULL row's value needs more than 64 bits (the
// host then computes the batch with the SQL engine's 128-bit decimals), M_FLOAT rounds
// each operation on its own (the _rn intrinsics are never fused into an FMA, so the
// result equals the CPU's). A NULL result holds 0, so no later instruction can overflow
// on a value that is not there.
#define V_LOAD 0
#define V_CONST 1
#define V_ADD 2
#define V_SUB 3
#define V_MUL 4
#define V_SCALE 5
#define V_TO_FLOAT 6
#define V_WRAP 7
#define V_YEAR 8
#define V_FLIP_SIGN 9
// Day numbers whose year Arrow's date_part computes (chrono's calendar); NULL outside.
#define YEAR_MIN_DAYS (-96465292ll)
#define YEAR_MAX_DAYS 95026236ll
#define M_WRAP 0
#define M_CHECKED 1
#define M_FLOAT 2
#define MAX_VALUE_STACK 16
#define I64_MIN (-9223372036854775807ll - 1ll)

__device__ __forceinline__ long long wrapping_mul(long long a, long long b)
{
    return (long long)((unsigned long long)a * (unsigned long long)b);
}

// a * b and whether the exact product leaves the i64 range.
__device__ __forceinline__ long long checked_mul(long long a, long long b, bool* overflow)
{
    const long long r = wrapping_mul(a, b);
    if (a == 0 || b == 0) {
        return 0;
    }
    if (a == -1) {
        *overflow = *overflow || b == I64_MIN;
    } else if (b == -1) {
        *overflow = *overflow || a == I64_MIN;
    } else if (r / a != b) {
        // a is neither 0 nor -1, so the division cannot trap.
        *overflow = true;
    }
    return r;
}

// The same function as oxidelake_device::value::program::apply.
__device__ __forceinline__ long long apply_arith(int code, int mode, long long a, long long b, bool* overflow)
{
    if (mode == M_FLOAT) {
        const double x = __longlong_as_double(a);
        const double y = __longlong_as_double(b);
        double r;
        if (code == V_ADD) {
            r = __dadd_rn(x, y);
        } else if (code == V_SUB) {
            r = __dsub_rn(x, y);
        } else {
            r = __dmul_rn(x, y);
        }
        return __double_as_longlong(r);
    }
    const unsigned long long ua = (unsigned long long)a;
    const unsigned long long ub = (unsigned long long)b;
    if (code == V_ADD) {
        const long long r = (long long)(ua + ub);
        if (mode == M_CHECKED && ((a ^ r) & (b ^ r)) < 0) {
            *overflow = true;
        }
        return r;
    }
    if (code == V_SUB) {
        const long long r = (long long)(ua - ub);
        if (mode == M_CHECKED && ((a ^ b) & (a ^ r)) < 0) {
            *overflow = true;
        }
        return r;
    }
    if (mode == M_CHECKED) {
        return checked_mul(a, b, overflow);
    }
    return wrapping_mul(a, b);
}

// The proleptic Gregorian year of a day number (H. Hinnant's civil_from_days; the same
// function as oxidelake_device::ops::year_of_days).
__device__ __forceinline__ long long year_of_days(long long days)
{
    const long long z = days + 719468;
    const long long era = (z >= 0 ? z : z - 146096) / 146097;
    const long long doe = z - era * 146097;
    const long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    const long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const long long mp = (5 * doy + 2) / 153;
    const long long month = mp < 10 ? mp + 3 : mp - 9;
    return yoe + era * 400 + (month <= 2 ? 1 : 0);
}

extern "C" __global__ void eval_values(const unsigned long long* __restrict__ col_ptrs,
                                       const unsigned long long* __restrict__ valid_ptrs,
                                       const int* __restrict__ codes,
                                       const int* __restrict__ slots,
                                       const int* __restrict__ args,
                                       const long long* __restrict__ literals,
                                       int num_instrs,
                                       unsigned long long rows,
                                       long long* __restrict__ out_values,
                                       unsigned char* __restrict__ out_valid,
                                       unsigned int* __restrict__ overflow_flag)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    long long values[MAX_VALUE_STACK];
    bool valid[MAX_VALUE_STACK];
    int top = 0;
    bool overflow = false;
    for (int i = 0; i < num_instrs; ++i) {
        const int code = codes[i];
        if (code == V_LOAD || code == V_CONST || code == V_YEAR) {
            if (top >= MAX_VALUE_STACK) {
                out_valid[row] = 0;
                atomicOr(overflow_flag, 2u);
                return;
            }
            if (code == V_LOAD) {
                const int s = slots[i];
                const bool ok = bit_is_set((const unsigned char*)valid_ptrs[s], row);
                values[top] = ok ? ((const long long*)col_ptrs[s])[row] : 0;
                valid[top] = ok;
            } else if (code == V_YEAR) {
                const int s = slots[i];
                const long long days = ((const long long*)col_ptrs[s])[row];
                const bool ok = bit_is_set((const unsigned char*)valid_ptrs[s], row) &&
                                days >= YEAR_MIN_DAYS && days <= YEAR_MAX_DAYS;
                values[top] = ok ? year_of_days(days) : 0;
                valid[top] = ok;
            } else {
                values[top] = literals[i];
                valid[top] = true;
            }
            ++top;
            continue;
        }
        if (top < 1 || (code <= V_MUL && top < 2)) {
            out_valid[row] = 0;
            atomicOr(overflow_flag, 2u);
            return;
        }
        if (code == V_SCALE) {
            bool o = false;
            values[top - 1] = checked_mul(values[top - 1], literals[i], &o);
            overflow = overflow || (o && valid[top - 1]);
        } else if (code == V_TO_FLOAT) {
            values[top - 1] = __double_as_longlong((double)values[top - 1]);
        } else if (code == V_FLIP_SIGN) {
            // SQL's -x on a float: the sign bit flips, a NaN's included.
            values[top - 1] = valid[top - 1] ? (values[top - 1] ^ I64_MIN) : 0;
        } else if (code == V_WRAP) {
            const int shift = 64 - args[i];
            values[top - 1] = (long long)((unsigned long long)values[top - 1] << shift) >> shift;
        } else {
            --top;
            bool o = false;
            const bool ok = valid[top - 1] && valid[top];
            const long long r = apply_arith(code, args[i], values[top - 1], values[top], &o);
            overflow = overflow || (o && ok);
            values[top - 1] = ok ? r : 0;
            valid[top - 1] = ok;
        }
    }
    if (overflow) {
        atomicOr(overflow_flag, 1u);
    }
    const bool ok = top == 1 && valid[0];
    out_values[row] = ok ? values[0] : 0;
    out_valid[row] = ok ? 1 : 0;
}

// ---------------------------------------------------------------------------------------
// An upload's narrow images widened in place (ADR-0015, "Narrow images across the bus"):
// a column whose values in a batch span fewer than 2^32 images crosses the bus as
// `width`-byte offsets from `base` (the smallest image), and one thread per row writes
// its 8-byte image, out[i] = base + offset[i] (an offset is unsigned; the sum wraps as
// the host's subtraction did, so every image, float bits included, comes back exact).
// `width` is 1, 2 or 4; `narrow` is aligned to it. A NULL row's offset is whatever the
// host wrote; readers check validity.
extern "C" __global__ void widen_images(const unsigned char* __restrict__ narrow,
                                        unsigned long long width,
                                        long long base,
                                        unsigned long long rows,
                                        long long* __restrict__ out)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= rows) {
        return;
    }
    unsigned long long offset;
    if (width == 1ull) {
        offset = narrow[i];
    } else if (width == 2ull) {
        offset = ((const unsigned short*)narrow)[i];
    } else {
        offset = ((const unsigned int*)narrow)[i];
    }
    out[i] = (long long)((unsigned long long)base + offset);
}
