// aggregation.cu — SUM / COUNT / MIN / MAX over a device batch's columns, grouped by any
// number of its key columns (ADR-0015: the one aggregation path, host batches included).
//
//   1. agg_assign_groups_rows
//                         one thread per row: finds or claims its key's slot in an
//                         open-addressing table (atomicCAS on slot_state: 0 empty,
//                         1 being written, 2 ready); the slot holds its first row, and
//                         keys are compared column by column where they lie (8-byte
//                         images, or i32 offsets + bytes for strings; NULL equals NULL).
//   2. agg_update_i64 / agg_update_f64
//                         one thread per row: atomically folds the value into its
//                         group's accumulator; counts[] counts non-null values (COUNT's
//                         result, and "is the SUM/MIN/MAX NULL" for the others). COUNT
//                         reads only the validity, so its values pointer may be any
//                         column. AGG_SUM_LO / AGG_SUM_HI sum a value's low 32 bits
//                         (zero-extended) and high 32 bits (sign-extended): a decimal sum
//                         of fewer than 2^31 rows is exact as hi_sum * 2^32 + lo_sum.
//   3. agg_slot_flags     a byte per slot: is it used (then count_flags,
//                         exclusive_scan_blocks and compact_rows of filter_project.cu list
//                         the used slots in slot order: the dense group numbers).
//   4. agg_group_rows     each group's first row (its key values' row, for the gather).
//   5. agg_fill           an accumulator column's initial value (MIN / MAX).
//   6. agg_compact_words  the used slots' accumulators, word column by word column, into
//                         the output batch.
//
// Semantics match the CPU path: an integer SUM adds with two's complement atomicAdd on
// unsigned 64-bit, so a sum past an i64 would wrap here; GpuPartialAggregateExec never
// hands over a column that can (values that could overflow an i64 sum travel as 32-bit
// limbs, AGG_SUM_LO / AGG_SUM_HI or host-side limbs, and decimal batches are cut into
// slices whose sums fit), joins the limbs' sums exactly on the host, and SQL's SUM
// raises an overflow error rather than returning a wrapped value
// (docs/sql-semantics.md). NULL values are skipped, float MIN/MAX use IEEE total order
// (NaN is largest) via atomicMin/atomicMax on the order-preserving integer image of the
// double.
// Float SUM uses atomicAdd(double): the result can differ from a sequential sum in the
// last bits, as any parallel sum does.
//
// Grid math: a 1-D grid of ceil(rows / blockDim.x) blocks. capacity is a power of two,
// at least 2x the expected number of distinct keys.
// Every global access is bounds-checked.

#define AGG_SUM 0
#define AGG_COUNT 1
#define AGG_MIN 2
#define AGG_MAX 3
#define AGG_SUM_LO 4
#define AGG_SUM_HI 5

__device__ __forceinline__ unsigned long long agg_hash(long long key)
{
    unsigned long long h = (unsigned long long)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

__device__ __forceinline__ bool agg_valid(const unsigned char* bitmap, unsigned long long i)
{
    return bitmap == 0 || ((bitmap[i >> 3] >> (i & 7ull)) & 1u);
}

__device__ __forceinline__ long long ordered_from_double(double v)
{
    const long long bits = __double_as_longlong(v);
    return bits ^ (long long)(((unsigned long long)(bits >> 63)) >> 1);
}

extern "C" __global__ void agg_update_i64(const long long* __restrict__ values,
                                          const unsigned char* __restrict__ valid,
                                          const unsigned int* __restrict__ group_of_row,
                                          unsigned long long rows,
                                          unsigned long long groups,
                                          int op,
                                          long long* __restrict__ acc,
                                          unsigned long long* __restrict__ counts)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows || !agg_valid(valid, row)) {
        return;
    }
    const unsigned long long g = group_of_row[row];
    if (g >= groups) {
        return;
    }
    atomicAdd(&counts[g], 1ull);
    if (op == AGG_COUNT) {
        return;  // the validity is all COUNT reads
    }
    const long long v = values[row];
    switch (op) {
    case AGG_SUM: atomicAdd((unsigned long long*)&acc[g], (unsigned long long)v); break;
    case AGG_MIN: atomicMin(&acc[g], v); break;
    case AGG_MAX: atomicMax(&acc[g], v); break;
    case AGG_SUM_LO:
        atomicAdd((unsigned long long*)&acc[g], ((unsigned long long)v) & 0xffffffffull);
        break;
    case AGG_SUM_HI: atomicAdd((unsigned long long*)&acc[g], (unsigned long long)(v >> 32)); break;
    default: break;
    }
}

// acc_sum is used by SUM; acc_ordered (initialised by the host to LLONG_MAX for MIN and
// LLONG_MIN for MAX) holds the ordered integer image for MIN/MAX.
extern "C" __global__ void agg_update_f64(const double* __restrict__ values,
                                          const unsigned char* __restrict__ valid,
                                          const unsigned int* __restrict__ group_of_row,
                                          unsigned long long rows,
                                          unsigned long long groups,
                                          int op,
                                          double* __restrict__ acc_sum,
                                          long long* __restrict__ acc_ordered,
                                          unsigned long long* __restrict__ counts)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows || !agg_valid(valid, row)) {
        return;
    }
    const unsigned long long g = group_of_row[row];
    if (g >= groups) {
        return;
    }
    const double v = values[row];
    atomicAdd(&counts[g], 1ull);
    switch (op) {
    case AGG_SUM: atomicAdd(&acc_sum[g], v); break;
    case AGG_MIN: atomicMin(&acc_ordered[g], ordered_from_double(v)); break;
    case AGG_MAX: atomicMax(&acc_ordered[g], ordered_from_double(v)); break;
    default: break;
    }
}

// ---- Grouping a device-resident batch by its key columns (ADR-0014) ----
//
// The key tables hold one entry per key column: kinds (0 = 8-byte images, 1 = strings),
// the images' address, the strings' offsets and bytes addresses, and the validity
// bitmap's address (0: no NULLs). Addresses lie in the batch's allocation.

#define AGG_KEY_IMAGES 0
#define AGG_KEY_STRING 1

__device__ __forceinline__ unsigned long long agg_combine(unsigned long long h, unsigned long long v)
{
    return agg_hash((long long)(h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))));
}

__device__ unsigned long long agg_row_hash(const int* kinds,
                                           const unsigned long long* images,
                                           const unsigned long long* offsets,
                                           const unsigned long long* bytes,
                                           const unsigned long long* valid,
                                           int columns,
                                           unsigned long long row)
{
    unsigned long long h = 0x84222325cbf29ce4ull;
    for (int c = 0; c < columns; ++c) {
        if (!agg_valid((const unsigned char*)valid[c], row)) {
            h = agg_combine(h, 0x5bd1e9955bd1e995ull);
            continue;
        }
        if (kinds[c] == AGG_KEY_STRING) {
            const int* off = (const int*)offsets[c];
            const unsigned char* b = (const unsigned char*)bytes[c];
            unsigned long long s = 0xcbf29ce484222325ull;  // FNV-1a over the bytes
            for (int i = off[row]; i < off[row + 1]; ++i) {
                s ^= b[i];
                s *= 0x100000001b3ull;
            }
            h = agg_combine(h, s ^ (unsigned long long)(off[row + 1] - off[row]));
        } else {
            h = agg_combine(h, (unsigned long long)((const long long*)images[c])[row]);
        }
    }
    return h;
}

__device__ bool agg_rows_equal(const int* kinds,
                               const unsigned long long* images,
                               const unsigned long long* offsets,
                               const unsigned long long* bytes,
                               const unsigned long long* valid,
                               int columns,
                               unsigned long long a,
                               unsigned long long b)
{
    for (int c = 0; c < columns; ++c) {
        const unsigned char* bitmap = (const unsigned char*)valid[c];
        const bool va = agg_valid(bitmap, a), vb = agg_valid(bitmap, b);
        if (va != vb) {
            return false;
        }
        if (!va) {
            continue;  // NULL groups with NULL
        }
        if (kinds[c] == AGG_KEY_STRING) {
            const int* off = (const int*)offsets[c];
            const unsigned char* bs = (const unsigned char*)bytes[c];
            const int len = off[a + 1] - off[a];
            if (len != off[b + 1] - off[b]) {
                return false;
            }
            for (int i = 0; i < len; ++i) {
                if (bs[off[a] + i] != bs[off[b] + i]) {
                    return false;
                }
            }
        } else {
            const long long* v = (const long long*)images[c];
            if (v[a] != v[b]) {
                return false;
            }
        }
    }
    return true;
}

extern "C" __global__ void agg_assign_groups_rows(const int* __restrict__ kinds,
                                                  const unsigned long long* __restrict__ images,
                                                  const unsigned long long* __restrict__ offsets,
                                                  const unsigned long long* __restrict__ bytes,
                                                  const unsigned long long* __restrict__ valid,
                                                  int columns,
                                                  unsigned long long rows,
                                                  unsigned long long capacity,
                                                  unsigned int* __restrict__ slot_state,
                                                  unsigned int* __restrict__ slot_row,
                                                  unsigned int* __restrict__ group_of_row,
                                                  unsigned int* __restrict__ overflow)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    const unsigned long long mask = capacity - 1ull;
    unsigned long long slot = agg_row_hash(kinds, images, offsets, bytes, valid, columns, row) & mask;
    for (unsigned long long step = 0; step < capacity; ++step) {
        unsigned int state = atomicCAS(&slot_state[slot], 0u, 1u);
        if (state == 0u) {
            slot_row[slot] = (unsigned int)row;
            __threadfence();
            atomicExch(&slot_state[slot], 2u);
            group_of_row[row] = (unsigned int)slot;
            return;
        }
        while (state == 1u) {
            // Another thread is writing this slot's row; wait until it is published.
            state = atomicAdd(&slot_state[slot], 0u);
        }
        if (agg_rows_equal(kinds, images, offsets, bytes, valid, columns, slot_row[slot], row)) {
            group_of_row[row] = (unsigned int)slot;
            return;
        }
        slot = (slot + 1ull) & mask;
    }
    atomicExch(overflow, 1u);  // more distinct keys than capacity: the host retries bigger
    group_of_row[row] = (unsigned int)capacity;
}

extern "C" __global__ void agg_slot_flags(const unsigned int* __restrict__ slot_state,
                                          unsigned long long slots,
                                          unsigned char* __restrict__ flags)
{
    const unsigned long long s = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (s < slots) {
        flags[s] = slot_state[s] == 2u ? 1 : 0;
    }
}

extern "C" __global__ void agg_group_rows(const unsigned int* __restrict__ used,
                                          unsigned long long groups,
                                          unsigned long long slots,
                                          const unsigned int* __restrict__ slot_row,
                                          unsigned int* __restrict__ group_rows)
{
    const unsigned long long g = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (g < groups && used[g] < slots) {
        group_rows[g] = slot_row[used[g]];
    }
}

extern "C" __global__ void agg_fill(long long* __restrict__ words, unsigned long long n, long long value)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        words[i] = value;
    }
}

// table holds `words` columns of `slots` 8-byte words ([w * slots + s]); out receives
// `words` columns of `groups` words ([w * groups + g]); one thread per output word.
extern "C" __global__ void agg_compact_words(const long long* __restrict__ table,
                                             unsigned long long slots,
                                             unsigned long long words,
                                             const unsigned int* __restrict__ used,
                                             unsigned long long groups,
                                             long long* __restrict__ out)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (groups == 0 || i >= groups * words) {
        return;
    }
    const unsigned long long w = i / groups, g = i % groups;
    const unsigned long long s = used[g];
    if (s < slots) {
        out[i] = table[w * slots + s];
    }
}
