// block_runner.h — runs one thread block: every CUDA thread a fiber on the calling OS
// thread, scheduled cooperatively.
//
// The scheduler sweeps the block's fibers; each runs until it reaches __syncthreads, a
// warp-synchronous intrinsic, or its end. After a sweep it releases the block barrier
// when every live thread waits there, and a warp barrier when every lane named in the
// waiting lanes' masks has arrived. Fibers never run concurrently with each other, so a
// thread is only ever interrupted at those points, exactly where CUDA lets other threads'
// writes become visible to it; blocks of a grid run concurrently on several OS threads
// (grid.h), which is where unsynchronised cross-block access can interleave.
//
// Because a block's fibers share one OS thread, `thread_local` storage is per-block
// storage: cuda_shim.h turns `__shared__` into `thread_local` for that reason.
//
// Errors a GPU would hang or fault on are reported instead: a warp intrinsic naming a
// lane that exited, and a block whose threads wait on different barriers (deadlock).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_runtime.h"
#include "fiber.h"

namespace emu {

struct LaunchShape {
    Dim3 grid;
    Dim3 block;
    size_t dynamic_shared_bytes = 0;
};

class BlockRunner {
public:
    // The runner of the calling OS thread (created on first use).
    static BlockRunner& for_this_thread();

    // Runs block `block_idx` of a launch to completion. Returns "" or what went wrong.
    std::string run(const LaunchShape& shape, Dim3 block_idx, const std::function<void()>& body);

    BlockRunner();
    ~BlockRunner();
    BlockRunner(const BlockRunner&) = delete;
    BlockRunner& operator=(const BlockRunner&) = delete;

    // Device side (called from fibers of this runner).
    struct Slot;
    Slot* current() const { return current_.load(std::memory_order_relaxed); }
    const LaunchShape& shape() const { return *shape_; }
    const Dim3& block_idx() const { return block_idx_; }
    void sync_threads();
    void warp_exchange(uint32_t mask, uint64_t value, dev::WarpValues* out);

private:
    struct Warp;
    static void fiber_main();
    void prepare_block(unsigned threads);
    bool release_barriers(unsigned threads);
    std::string describe_stuck(unsigned threads) const;
    void yield_to_scheduler(Slot* slot, int state);

    std::vector<std::unique_ptr<Slot>> slots_;
    std::vector<std::unique_ptr<Warp>> warps_;
    Fiber scheduler_;
    std::atomic<Slot*> current_{nullptr};
    const LaunchShape* shape_ = nullptr;
    Dim3 block_idx_;
    const std::function<void()>* body_ = nullptr;
    std::string error_;
    // Addresses for TSan happens-before edges: kernel start, block barrier, thread end.
    char start_token_ = 0;
    char barrier_token_ = 0;
    char done_token_ = 0;
};

}  // namespace emu
