// device_runtime.h — what a host-compiled kernel may ask of the emulator while it runs:
// its coordinates, the block barrier and the warp exchange. Called from cuda_shim.h only.
#pragma once

#include <cstddef>
#include <cstdint>

namespace emu {

struct Dim3 {
    unsigned x = 1, y = 1, z = 1;
};

// Upper bound on dynamic shared memory per block (the H200's opt-in maximum).
constexpr size_t kMaxDynamicSharedBytes = 232448;
// Dynamic shared memory a launch gets without cuFuncSetAttribute (as on a real device).
constexpr size_t kDefaultDynamicSharedBytes = 48 * 1024;

namespace dev {

const Dim3& thread_idx();
const Dim3& block_idx();
const Dim3& block_dim();
const Dim3& grid_dim();

// __syncthreads: returns once every thread of the block that has not exited arrived.
void sync_threads();

// The warp-synchronous core of __shfl_*_sync / __ballot_sync / __syncwarp: every lane
// of the calling warp named in `mask` deposits a value; once all of them have, each
// reads everyone's. Lanes that did not take part read back as the caller's own value.
struct WarpValues {
    uint64_t values[32];
    uint32_t arrived;  // lanes that deposited
    unsigned lane;     // the caller's lane
};
void warp_exchange(uint32_t mask, uint64_t value, WarpValues* out);

}  // namespace dev
}  // namespace emu
