// aggregation.cu — SUM / COUNT / MIN / MAX over Int64 or Float64 grouped by one Int64
// key of low cardinality, with atomics into a small device-resident group table.
//
//   1. agg_assign_groups  one thread per row: finds or claims the key's slot in an
//                         open-addressing table (atomicCAS on slot_state: 0 empty,
//                         1 being written, 2 ready) and writes the slot to group_of_row.
//                         NULL keys map to the extra slot `capacity` (their own group).
//   2. agg_update_i64 / agg_update_f64
//                         one thread per row: atomically folds the value into its
//                         group's accumulator; counts[] counts non-null values (COUNT's
//                         result, and "is the SUM/MIN/MAX NULL" for the others).
//
// Semantics match the CPU path: integer SUM wraps (two's complement atomicAdd on
// unsigned 64-bit), NULL values are skipped, float MIN/MAX use IEEE total order (NaN is
// largest) via atomicMin/atomicMax on the order-preserving integer image of the double.
// Float SUM uses atomicAdd(double): the result can differ from a sequential sum in the
// last bits, as any parallel sum does.
//
// Grid math: a 1-D grid of ceil(rows / blockDim.x) blocks. capacity is a power of two,
// at least 2x the expected number of distinct keys; the tables hold capacity + 1 slots.
// Every global access is bounds-checked.

#define AGG_SUM 0
#define AGG_COUNT 1
#define AGG_MIN 2
#define AGG_MAX 3

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

extern "C" __global__ void agg_assign_groups(const long long* __restrict__ keys,
                                             const unsigned char* __restrict__ valid,
                                             unsigned long long rows,
                                             unsigned long long capacity,
                                             unsigned int* __restrict__ slot_state,
                                             long long* __restrict__ slot_keys,
                                             unsigned int* __restrict__ group_of_row,
                                             unsigned int* __restrict__ overflow)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    if (!agg_valid(valid, row)) {
        group_of_row[row] = (unsigned int)capacity;
        atomicExch(&slot_state[capacity], 2u);  // every NULL row writes it: atomically (found by the emulator's TSan run)
        return;
    }
    const long long key = keys[row];
    const unsigned long long mask = capacity - 1ull;
    unsigned long long slot = agg_hash(key) & mask;
    for (unsigned long long step = 0; step < capacity; ++step) {
        unsigned int state = atomicCAS(&slot_state[slot], 0u, 1u);
        if (state == 0u) {
            slot_keys[slot] = key;
            __threadfence();
            atomicExch(&slot_state[slot], 2u);
            group_of_row[row] = (unsigned int)slot;
            return;
        }
        while (state == 1u) {
            // Another thread is writing this slot's key; wait until it is published.
            state = atomicAdd(&slot_state[slot], 0u);
        }
        if (slot_keys[slot] == key) {
            group_of_row[row] = (unsigned int)slot;
            return;
        }
        slot = (slot + 1ull) & mask;
    }
    atomicExch(overflow, 1u);  // more distinct keys than capacity: the host retries bigger
    group_of_row[row] = (unsigned int)capacity;
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
    const long long v = values[row];
    atomicAdd(&counts[g], 1ull);
    switch (op) {
    case AGG_SUM: atomicAdd((unsigned long long*)&acc[g], (unsigned long long)v); break;
    case AGG_MIN: atomicMin(&acc[g], v); break;
    case AGG_MAX: atomicMax(&acc[g], v); break;
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
