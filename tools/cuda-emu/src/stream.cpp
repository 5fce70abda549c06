// stream.cpp — see stream.h.
#include "stream.h"

#include "driver_state.h"
#include "trace.h"

namespace emu {

void Marker::complete() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        done_ = true;
        completed_at_ = std::chrono::steady_clock::now();
    }
    cv_.notify_all();
}

void Marker::wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return done_; });
}

bool Marker::done() {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
}

std::chrono::steady_clock::time_point Marker::completed_at() {
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_at_;
}

Stream::Stream(std::string name) : name_(std::move(name)), worker_([this] { serve(); }) {}

Stream::~Stream() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    cv_.notify_all();
    worker_.join();
}

void Stream::enqueue(std::function<void()> op, bool always_run, std::string label) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [this] { return queue_.size() < kMaxQueuedOps; });
    queue_.push_back(Op{std::move(op), always_run, std::move(label)});
    lock.unlock();
    cv_.notify_all();
}

std::shared_ptr<Marker> Stream::record() {
    auto marker = std::make_shared<Marker>();
    enqueue([marker] { marker->complete(); }, /*always_run=*/true, "record");
    return marker;
}

void Stream::wait_for(std::shared_ptr<Marker> marker) {
    enqueue([marker] { marker->wait(); }, /*always_run=*/true, "wait");
}

void Stream::synchronize() { record()->wait(); }

bool Stream::idle() {
    std::lock_guard<std::mutex> lock(mutex_);
    return queue_.empty() && !busy_;
}

void Stream::serve() {
    for (;;) {
        Op op;
        {
            std::unique_lock<std::mutex> lock(mutex_);
            busy_ = false;
            cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
            if (queue_.empty()) return;  // stopping, and everything ran
            op = std::move(queue_.front());
            queue_.pop_front();
            busy_ = true;
        }
        cv_.notify_all();  // room in the queue again
        if (op.always_run || sticky_error() == CUDA_SUCCESS) {
            op.run();
            if (!op.label.empty() && tracing()) trace_record(name_, op.label);
        }
    }
}

}  // namespace emu
