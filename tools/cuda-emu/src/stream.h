// stream.h — a CUDA stream: a bounded FIFO of work run in order by one host thread.
//
// Each stream (and the legacy null stream) has its own worker thread, so work on two
// streams really overlaps and an ordering the host code forgot to express with an event
// shows up as a wrong result or a race rather than being hidden by a global order.
// An event record is a Marker enqueued on the stream; waiting on an event enqueues a wait
// for the marker that the event held at that moment (CUDA's capture-at-call semantics).
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace emu {

// A point in a stream's queue; completes when the worker reaches it.
class Marker {
public:
    void complete();
    void wait();
    bool done();
    // When the marker completed (valid once done()).
    std::chrono::steady_clock::time_point completed_at();

private:
    std::mutex mutex_;
    std::condition_variable cv_;
    bool done_ = false;
    std::chrono::steady_clock::time_point completed_at_;
};

class Stream {
public:
    // Most operations queued and not yet run before enqueue blocks the host (the driver's
    // push-buffer back-pressure).
    static constexpr size_t kMaxQueuedOps = 1024;

    explicit Stream(std::string name);
    // Runs everything already queued, then stops the worker.
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    // Queues `op`. Unless `always_run`, the op is skipped once the context has a sticky
    // error (a faulted device runs nothing more). A non-empty `label` ("h2d", "launch
    // name", ...) is written to the trace (trace.h) when the op has run, if tracing is on.
    void enqueue(std::function<void()> op, bool always_run = false, std::string label = {});
    // Queues a marker and returns it.
    std::shared_ptr<Marker> record();
    // Queues a wait: later work on this stream starts after `marker` completed.
    void wait_for(std::shared_ptr<Marker> marker);
    // Blocks until everything queued so far has run.
    void synchronize();
    // Whether nothing is queued or running.
    bool idle();

    const std::string& name() const { return name_; }

private:
    struct Op {
        std::function<void()> run;
        bool always_run;
        std::string label;
    };
    void serve();

    std::string name_;
    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<Op> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread worker_;
};

}  // namespace emu
