// grid.cpp — the block pool behind run_grid (see grid.h).
#include "grid.h"

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

namespace emu {
namespace {

struct GridJob {
    const LaunchShape* shape = nullptr;
    const std::function<void()>* body = nullptr;
    unsigned long long blocks = 0;
    std::atomic<unsigned long long> next{0};
    std::mutex mutex;
    std::condition_variable finished_cv;
    unsigned long long finished = 0;  // guarded by mutex
    std::string error;                // guarded by mutex
};

Dim3 block_coordinates(const Dim3& grid, unsigned long long linear) {
    Dim3 idx;
    idx.x = static_cast<unsigned>(linear % grid.x);
    idx.y = static_cast<unsigned>((linear / grid.x) % grid.y);
    idx.z = static_cast<unsigned>(linear / (static_cast<unsigned long long>(grid.x) * grid.y));
    return idx;
}

// Runs blocks of `job` until none is left to claim.
void work_on(GridJob& job) {
    BlockRunner& runner = BlockRunner::for_this_thread();
    for (;;) {
        const unsigned long long b = job.next.fetch_add(1, std::memory_order_relaxed);
        if (b >= job.blocks) return;
        std::string error = runner.run(*job.shape, block_coordinates(job.shape->grid, b), *job.body);
        std::lock_guard<std::mutex> lock(job.mutex);
        if (!error.empty() && job.error.empty()) job.error = std::move(error);
        if (++job.finished == job.blocks) job.finished_cv.notify_all();
    }
}

class BlockPool {
public:
    static BlockPool& instance() {
        static BlockPool* pool = new BlockPool();  // never destroyed: threads outlive exit
        return *pool;
    }

    void submit(const std::shared_ptr<GridJob>& job) {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            jobs_.push_back(job);
        }
        cv_.notify_all();
    }

private:
    BlockPool() {
        unsigned threads = std::thread::hardware_concurrency();
        threads = threads > 1 ? threads - 1 : 1;
        if (threads > 7) threads = 7;
        if (const char* env = std::getenv("OXIDE_CUDA_EMU_SM_THREADS")) {
            const long value = std::strtol(env, nullptr, 10);
            if (value >= 1 && value <= 64) threads = static_cast<unsigned>(value);
        }
        for (unsigned i = 0; i < threads; ++i) std::thread([this] { serve(); }).detach();
    }

    void serve() {
        for (;;) {
            std::shared_ptr<GridJob> job;
            {
                std::unique_lock<std::mutex> lock(mutex_);
                cv_.wait(lock, [this] { return !jobs_.empty(); });
                job = jobs_.front();
                if (job->next.load(std::memory_order_relaxed) >= job->blocks) {
                    jobs_.pop_front();  // every block claimed: nothing left for the pool
                    continue;
                }
            }
            work_on(*job);
        }
    }

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::shared_ptr<GridJob>> jobs_;  // bounded by the number of streams
};

}  // namespace

std::string run_grid(const LaunchShape& shape, const std::function<void()>& body) {
    auto job = std::make_shared<GridJob>();
    job->shape = &shape;
    job->body = &body;
    job->blocks = static_cast<unsigned long long>(shape.grid.x) * shape.grid.y * shape.grid.z;
    if (job->blocks > 1) BlockPool::instance().submit(job);
    work_on(*job);
    std::unique_lock<std::mutex> lock(job->mutex);
    job->finished_cv.wait(lock, [&] { return job->finished == job->blocks; });
    return job->error;
}

}  // namespace emu
