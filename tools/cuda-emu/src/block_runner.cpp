// block_runner.cpp — the cooperative scheduler of one thread block (see block_runner.h).
#include "block_runner.h"

#include <cstdio>
#include <string>

namespace emu {

namespace {
enum State : int { kReady = 0, kAtBlockBarrier = 1, kAtWarpBarrier = 2, kDone = 3 };

// The runner whose fiber is executing on this OS thread (set before switching in).
// Accessed atomically: the scheduler writes it and fibers (other TSan threads) read it.
thread_local BlockRunner* tls_runner_ptr = nullptr;
BlockRunner* tls_runner() { return __atomic_load_n(&tls_runner_ptr, __ATOMIC_RELAXED); }
void set_tls_runner(BlockRunner* runner) { __atomic_store_n(&tls_runner_ptr, runner, __ATOMIC_RELAXED); }

std::string dim_text(const Dim3& d) {
    return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," + std::to_string(d.z) + ")";
}
}  // namespace

struct BlockRunner::Slot {
    Fiber fiber;
    std::atomic<int> state{kDone};
    Dim3 thread_idx;
    unsigned lane = 0;
    unsigned warp = 0;
    std::atomic<uint32_t> mask{0};
    std::atomic<uint64_t> exchange[2] = {{0}, {0}};
};

struct BlockRunner::Warp {
    std::atomic<unsigned> generation{0};
    std::atomic<uint32_t> released_lanes{0};
    uint32_t present = 0;  // lanes that exist in this block
};

BlockRunner& BlockRunner::for_this_thread() {
    thread_local BlockRunner runner;
    return runner;
}

BlockRunner::BlockRunner() { fiber_adopt_current_thread(scheduler_); }

BlockRunner::~BlockRunner() {
    for (auto& slot : slots_) fiber_release(slot->fiber);
}

void BlockRunner::fiber_main() {
    BlockRunner* runner = tls_runner();
    Slot* slot = runner->current();
    race_acquire(&runner->start_token_);
    (*runner->body_)();
    slot->state.store(kDone, std::memory_order_relaxed);
    race_release(&runner->done_token_);  // everything this thread did precedes the block's end
    fiber_switch(slot->fiber, runner->scheduler_);
    __builtin_unreachable();
}

void BlockRunner::prepare_block(unsigned threads) {
    while (slots_.size() < threads) {
        auto slot = std::make_unique<Slot>();
        fiber_allocate(slot->fiber);
        slots_.push_back(std::move(slot));
    }
    const unsigned warp_count = (threads + 31) / 32;
    while (warps_.size() < warp_count) warps_.push_back(std::make_unique<Warp>());
    const Dim3& dim = shape_->block;
    for (unsigned i = 0; i < threads; ++i) {
        Slot& slot = *slots_[i];
        slot.thread_idx = Dim3{i % dim.x, (i / dim.x) % dim.y, i / (dim.x * dim.y)};
        slot.lane = i % 32;
        slot.warp = i / 32;
        slot.state.store(kReady, std::memory_order_relaxed);
        fiber_prepare(slot.fiber, &BlockRunner::fiber_main);
    }
    for (unsigned w = 0; w < warp_count; ++w) {
        const unsigned lanes = threads - w * 32 >= 32 ? 32 : threads - w * 32;
        warps_[w]->present = lanes == 32 ? 0xffffffffu : ((1u << lanes) - 1u);
        warps_[w]->generation.store(0, std::memory_order_relaxed);
    }
}

std::string BlockRunner::run(const LaunchShape& shape, Dim3 block_idx, const std::function<void()>& body) {
    const unsigned threads = shape.block.x * shape.block.y * shape.block.z;
    shape_ = &shape;
    block_idx_ = block_idx;
    body_ = &body;
    error_.clear();
    prepare_block(threads);
    BlockRunner* previous = tls_runner();
    set_tls_runner(this);
    race_release(&start_token_);
    for (;;) {
        for (unsigned i = 0; i < threads; ++i) {
            Slot* slot = slots_[i].get();
            if (slot->state.load(std::memory_order_relaxed) != kReady) continue;
            current_.store(slot, std::memory_order_relaxed);
            fiber_switch(scheduler_, slot->fiber);
        }
        current_.store(nullptr, std::memory_order_relaxed);
        bool live = false;
        for (unsigned i = 0; i < threads && !live; ++i) {
            live = slots_[i]->state.load(std::memory_order_relaxed) != kDone;
        }
        if (!live) break;
        if (!release_barriers(threads)) {
            if (error_.empty()) error_ = describe_stuck(threads);
            // The stuck fibers are abandoned mid-kernel; give them fresh stacks (and TSan
            // contexts) so nothing of theirs leaks into the next block.
            for (unsigned i = 0; i < threads; ++i) {
                fiber_release(slots_[i]->fiber);
                fiber_allocate(slots_[i]->fiber);
                slots_[i]->state.store(kDone, std::memory_order_relaxed);
            }
            break;
        }
    }
    race_acquire(&done_token_);
    set_tls_runner(previous);
    std::string error = std::move(error_);
    error_.clear();
    if (!error.empty()) error = "block " + dim_text(block_idx) + ": " + error;
    return error;
}

bool BlockRunner::release_barriers(unsigned threads) {
    bool released = false;
    unsigned live = 0, at_block = 0;
    for (unsigned i = 0; i < threads; ++i) {
        const int state = slots_[i]->state.load(std::memory_order_relaxed);
        live += state != kDone;
        at_block += state == kAtBlockBarrier;
    }
    const unsigned warp_count = (threads + 31) / 32;
    for (unsigned w = 0; w < warp_count; ++w) {
        Warp& warp = *warps_[w];
        uint32_t arrived = 0, done = 0, wanted = 0;
        for (unsigned lane = 0; lane < 32 && w * 32 + lane < threads; ++lane) {
            const Slot& slot = *slots_[w * 32 + lane];
            const int state = slot.state.load(std::memory_order_relaxed);
            if (state == kAtWarpBarrier) {
                arrived |= 1u << lane;
                wanted |= slot.mask.load(std::memory_order_relaxed);
            }
            if (state == kDone) done |= 1u << lane;
        }
        if (arrived == 0) continue;
        const uint32_t absent = wanted & ~warp.present;
        const uint32_t missing = wanted & warp.present & ~arrived;
        if (missing != 0 && (missing & ~done) != 0) continue;  // still coming (or stuck)
        if ((absent | missing) != 0 && error_.empty()) {
            char text[160];
            std::snprintf(text, sizeof text,
                          "warp %u: a warp-synchronous intrinsic's mask names lanes 0x%08x that %s",
                          w, absent | missing, absent != 0 ? "do not exist in this block" : "have exited");
            error_ = text;
        }
        warp.released_lanes.store(arrived, std::memory_order_relaxed);
        warp.generation.fetch_add(1, std::memory_order_relaxed);
        for (unsigned lane = 0; lane < 32; ++lane) {
            if (arrived & (1u << lane)) slots_[w * 32 + lane]->state.store(kReady, std::memory_order_relaxed);
        }
        released = true;
    }
    if (!released && live > 0 && at_block == live) {
        for (unsigned i = 0; i < threads; ++i) {
            if (slots_[i]->state.load(std::memory_order_relaxed) == kAtBlockBarrier) {
                slots_[i]->state.store(kReady, std::memory_order_relaxed);
            }
        }
        released = true;
    }
    return released;
}

std::string BlockRunner::describe_stuck(unsigned threads) const {
    unsigned at_block = 0, at_warp = 0;
    for (unsigned i = 0; i < threads; ++i) {
        const int state = slots_[i]->state.load(std::memory_order_relaxed);
        at_block += state == kAtBlockBarrier;
        at_warp += state == kAtWarpBarrier;
    }
    return "deadlock: " + std::to_string(at_block) + " threads wait in __syncthreads while " +
           std::to_string(at_warp) + " wait in a warp-synchronous intrinsic (a GPU would hang)";
}

void BlockRunner::yield_to_scheduler(Slot* slot, int state) {
    slot->state.store(state, std::memory_order_relaxed);
    fiber_switch(slot->fiber, scheduler_);
}

void BlockRunner::sync_threads() {
    Slot* slot = current();
    race_release(&barrier_token_);
    yield_to_scheduler(slot, kAtBlockBarrier);
    race_acquire(&barrier_token_);
}

void BlockRunner::warp_exchange(uint32_t mask, uint64_t value, dev::WarpValues* out) {
    Slot* slot = current();
    Warp& warp = *warps_[slot->warp];
    const unsigned parity = warp.generation.load(std::memory_order_relaxed) & 1u;
    slot->exchange[parity].store(value, std::memory_order_relaxed);
    slot->mask.store(mask | (1u << slot->lane), std::memory_order_relaxed);
    race_release(&warp);
    yield_to_scheduler(slot, kAtWarpBarrier);
    race_acquire(&warp);
    const uint32_t arrived = warp.released_lanes.load(std::memory_order_relaxed);
    out->arrived = arrived;
    out->lane = slot->lane;
    for (unsigned lane = 0; lane < 32; ++lane) {
        out->values[lane] = (arrived & (1u << lane))
                                ? slots_[slot->warp * 32 + lane]->exchange[parity].load(std::memory_order_relaxed)
                                : value;
    }
}

namespace dev {

const Dim3& thread_idx() { return tls_runner()->current()->thread_idx; }
const Dim3& block_idx() { return tls_runner()->block_idx(); }
const Dim3& block_dim() { return tls_runner()->shape().block; }
const Dim3& grid_dim() { return tls_runner()->shape().grid; }
void sync_threads() { tls_runner()->sync_threads(); }
void warp_exchange(uint32_t mask, uint64_t value, WarpValues* out) { tls_runner()->warp_exchange(mask, value, out); }

}  // namespace dev
}  // namespace emu
