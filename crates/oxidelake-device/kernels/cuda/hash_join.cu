// hash_join.cu — inner equi-join on one Int64 key: an open-addressing, linear-probing
// multi-map in device memory, built with atomic compare-and-swap and probed in parallel.
//
//   1. join_build        one thread per build row: claims a free slot with atomicCAS on
//                        slot_state (0 = empty, 1 = taken), starting at hash(key) and
//                        stepping linearly; stores (key, row). Duplicate keys take
//                        separate slots. NULL keys are not inserted (they never join).
//   2. join_probe_count  one thread per probe row: walks the cluster from hash(key) to
//                        the first empty slot and counts equal keys -> counts[row].
//   3. join_scan_counts, join_scan_totals, join_add_block_offsets: exclusive prefix sums
//                        of counts -> offsets (64-bit), and their total at
//                        block_totals[blocks], the one value the host reads back:
//                        each block scans its rows' counts, one block scans the block
//                        totals, each block adds its offset.
//   4. join_probe_write  same walk, writing (build row, probe row) pairs at offsets[row].
//   5. join_match_flags  (semi and anti joins over device-resident batches, ADR-0014)
//                        a byte per probe row: whether it has a pair (matched = 1) or
//                        has none (matched = 0), for the filter's compaction kernels.
//
//   6. join_radix_keys   (joins on several integer-like keys over device-resident batches)
//                        one key per row, Σ (value − min) · stride over the key columns,
//                        NULL where a column is NULL or a value lies outside the build
//                        side's range: what the host's mixed-radix keys compute.
//
//   7. join_row_images   (a join that hands back row numbers, ADR-0015) the first `len`
//                        entries of a row list (a pair's build or probe row) as 8-byte
//                        images: out[i] = rows[i].
//
// The three scan kernels need blockDim.x == JOIN_BLOCK (shared memory of that size).
//
// capacity must be a power of two and larger than the number of build rows (the host
// sizes it at >= 2x), so every walk ends at an empty slot. Grid math: a 1-D grid of
// ceil(rows / blockDim.x) blocks for each kernel. Every global access is bounds-checked;
// a walk gives up after `capacity` steps even if the table were full.

__device__ __forceinline__ unsigned long long hash_key(long long key)
{
    // MurmurHash3 fmix64: cheap, and spreads sequential keys across the table.
    unsigned long long h = (unsigned long long)key;
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

__device__ __forceinline__ bool is_valid(const unsigned char* bitmap, unsigned long long i)
{
    return bitmap == 0 || ((bitmap[i >> 3] >> (i & 7ull)) & 1u);
}

extern "C" __global__ void join_build(const long long* __restrict__ keys,
                                      const unsigned char* __restrict__ valid,
                                      unsigned long long rows,
                                      unsigned long long capacity,
                                      unsigned int* __restrict__ slot_state,
                                      long long* __restrict__ slot_keys,
                                      unsigned int* __restrict__ slot_rows)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows || !is_valid(valid, row)) {
        return;
    }
    const long long key = keys[row];
    const unsigned long long mask = capacity - 1ull;
    unsigned long long slot = hash_key(key) & mask;
    for (unsigned long long step = 0; step < capacity; ++step) {
        if (atomicCAS(&slot_state[slot], 0u, 1u) == 0u) {
            slot_keys[slot] = key;
            slot_rows[slot] = (unsigned int)row;
            return;
        }
        slot = (slot + 1ull) & mask;
    }
}

extern "C" __global__ void join_probe_count(const long long* __restrict__ keys,
                                            const unsigned char* __restrict__ valid,
                                            unsigned long long rows,
                                            unsigned long long capacity,
                                            const unsigned int* __restrict__ slot_state,
                                            const long long* __restrict__ slot_keys,
                                            unsigned int* __restrict__ counts)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) {
        return;
    }
    unsigned int found = 0;
    if (is_valid(valid, row)) {
        const long long key = keys[row];
        const unsigned long long mask = capacity - 1ull;
        unsigned long long slot = hash_key(key) & mask;
        for (unsigned long long step = 0; step < capacity && slot_state[slot] != 0u; ++step) {
            found += (slot_keys[slot] == key) ? 1u : 0u;
            slot = (slot + 1ull) & mask;
        }
    }
    counts[row] = found;
}

extern "C" __global__ void join_probe_write(const long long* __restrict__ keys,
                                            const unsigned char* __restrict__ valid,
                                            unsigned long long rows,
                                            unsigned long long capacity,
                                            const unsigned int* __restrict__ slot_state,
                                            const long long* __restrict__ slot_keys,
                                            const unsigned int* __restrict__ slot_rows,
                                            const unsigned long long* __restrict__ offsets,
                                            unsigned long long out_capacity,
                                            unsigned int* __restrict__ out_build,
                                            unsigned int* __restrict__ out_probe)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows || !is_valid(valid, row)) {
        return;
    }
    const long long key = keys[row];
    const unsigned long long mask = capacity - 1ull;
    unsigned long long slot = hash_key(key) & mask;
    unsigned long long dst = offsets[row];
    for (unsigned long long step = 0; step < capacity && slot_state[slot] != 0u; ++step) {
        if (slot_keys[slot] == key && dst < out_capacity) {
            out_build[dst] = slot_rows[slot];
            out_probe[dst] = (unsigned int)row;
            ++dst;
        }
        slot = (slot + 1ull) & mask;
    }
}

// One thread per 8 rows (one byte of the validity bitmap it writes): each row's
// mixed-radix key over `digits` integer-like key columns, whose 8-byte images are at
// col_ptrs[d] and validity bitmaps at valid_ptrs[d] (0: no NULLs). A row is valid when
// every column is and every value lies in mins[d] .. mins[d] + spans[d]; its key is then
// Σ (value − mins[d]) · strides[d] (one-to-one: the host checked the spans' product fits).
extern "C" __global__ void join_radix_keys(const unsigned long long* __restrict__ col_ptrs,
                                           const unsigned long long* __restrict__ valid_ptrs,
                                           const long long* __restrict__ mins,
                                           const unsigned long long* __restrict__ spans,
                                           const long long* __restrict__ strides,
                                           unsigned int digits,
                                           unsigned long long rows,
                                           long long* __restrict__ keys,
                                           unsigned char* __restrict__ valid_bits)
{
    const unsigned long long byte = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long first = byte * 8ull;
    if (first >= rows) {
        return;
    }
    unsigned int packed = 0;
    for (unsigned int j = 0; j < 8u && first + j < rows; ++j) {
        const unsigned long long row = first + j;
        long long key = 0;
        bool found = true;
        for (unsigned int d = 0; d < digits && found; ++d) {
            const long long* values = (const long long*)col_ptrs[d];
            if (!is_valid((const unsigned char*)valid_ptrs[d], row)) {
                found = false;
                break;
            }
            // A value below the minimum wraps to an offset far past the span.
            const unsigned long long offset =
                (unsigned long long)values[row] - (unsigned long long)mins[d];
            if (offset >= spans[d]) {
                found = false;
                break;
            }
            key += (long long)(offset * (unsigned long long)strides[d]);
        }
        keys[row] = found ? key : 0;
        if (found) {
            packed |= 1u << j;
        }
    }
    valid_bits[byte] = (unsigned char)packed;
}

#define JOIN_BLOCK 256

// Exclusive scan of one value per thread across the block (Hillis-Steele in shared
// memory); *total gets the block's sum. Every thread of the block must call it.
__device__ unsigned long long block_scan_u64(unsigned long long value,
                                             unsigned long long* shared,
                                             unsigned long long* total)
{
    shared[threadIdx.x] = value;
    __syncthreads();
    for (unsigned int d = 1; d < blockDim.x; d <<= 1) {
        const unsigned long long add = (threadIdx.x >= d) ? shared[threadIdx.x - d] : 0ull;
        __syncthreads();
        shared[threadIdx.x] += add;
        __syncthreads();
    }
    const unsigned long long inclusive = shared[threadIdx.x];
    *total = shared[blockDim.x - 1];
    __syncthreads();
    return inclusive - value;
}

// One thread per probe row: its offset within its block, and each block's total.
extern "C" __global__ void join_scan_counts(const unsigned int* __restrict__ counts,
                                            unsigned long long rows,
                                            unsigned long long* __restrict__ offsets,
                                            unsigned long long* __restrict__ block_totals)
{
    __shared__ unsigned long long shared[JOIN_BLOCK];
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long value = (row < rows) ? (unsigned long long)counts[row] : 0ull;
    unsigned long long total;
    const unsigned long long prefix = block_scan_u64(value, shared, &total);
    if (row < rows) {
        offsets[row] = prefix;
    }
    if (threadIdx.x == 0) {
        block_totals[blockIdx.x] = total;
    }
}

// Single block: exclusive scan of the `blocks` block totals in place, in chunks of
// JOIN_BLOCK; the grand total goes to block_totals[blocks] (blocks + 1 entries).
extern "C" __global__ void join_scan_totals(unsigned long long* __restrict__ block_totals,
                                            unsigned long long blocks)
{
    __shared__ unsigned long long shared[JOIN_BLOCK];
    unsigned long long carry = 0;
    for (unsigned long long base = 0; base < blocks; base += JOIN_BLOCK) {
        const unsigned long long i = base + threadIdx.x;
        const unsigned long long value = (i < blocks) ? block_totals[i] : 0ull;
        unsigned long long total;
        const unsigned long long prefix = block_scan_u64(value, shared, &total);
        if (i < blocks) {
            block_totals[i] = carry + prefix;
        }
        carry += total;
    }
    if (threadIdx.x == 0) {
        block_totals[blocks] = carry;
    }
}

// One thread per probe row: adds its block's offset (same grid as join_scan_counts).
extern "C" __global__ void join_add_block_offsets(unsigned long long* __restrict__ offsets,
                                                  unsigned long long rows,
                                                  const unsigned long long* __restrict__ block_totals)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        offsets[row] += block_totals[blockIdx.x];
    }
}

extern "C" __global__ void join_row_images(const unsigned int* __restrict__ rows,
                                           unsigned long long len,
                                           long long* __restrict__ out)
{
    const unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < len) {
        out[i] = (long long)rows[i];
    }
}

extern "C" __global__ void join_match_flags(const unsigned int* __restrict__ counts,
                                            unsigned long long rows,
                                            int matched,
                                            unsigned char* __restrict__ flags)
{
    const unsigned long long row = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        flags[row] = ((counts[row] > 0u) == (matched != 0)) ? 1 : 0;
    }
}
