// driver_stream.cpp — streams, events and host callbacks.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "driver_state.h"
#include "trace.h"
#include "streams_registry.h"

using namespace emu;

namespace {

struct Event {
    unsigned flags = 0;
    std::mutex mutex;
    std::shared_ptr<Marker> last;  // the most recent record, or null if never recorded
};

struct Handles {
    std::mutex mutex;
    std::set<Stream*> streams;
    std::set<Event*> events;
};

Handles& handles() {
    static Handles* h = new Handles();
    return *h;
}

Event* resolve_event(CUevent handle) {
    auto* event = reinterpret_cast<Event*>(handle);
    std::lock_guard<std::mutex> lock(handles().mutex);
    return handles().events.count(event) != 0 ? event : nullptr;
}

std::shared_ptr<Marker> last_marker(Event* event) {
    std::lock_guard<std::mutex> lock(event->mutex);
    return event->last;
}

}  // namespace

namespace emu {

Stream* resolve_stream(CUstream handle) {
    const auto value = reinterpret_cast<uintptr_t>(handle);
    if (value == 0 || value == 1 || value == 2) return &null_stream();
    auto* stream = reinterpret_cast<Stream*>(handle);
    std::lock_guard<std::mutex> lock(handles().mutex);
    return handles().streams.count(stream) != 0 ? stream : nullptr;
}

void synchronize_all_streams() {
    std::set<Stream*> streams;
    {
        std::lock_guard<std::mutex> lock(handles().mutex);
        streams = handles().streams;
        // Under the lock, so a concurrent cuStreamDestroy cannot free a stream we wait on.
        for (Stream* s : streams) s->synchronize();
    }
    null_stream().synchronize();
}

}  // namespace emu

// ---- streams ---------------------------------------------------------------------------

EMU_EXPORT CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
    if (CUresult e = check_context()) return e;
    if (stream == nullptr || flags > 1) return CUDA_ERROR_INVALID_VALUE;
    count_call("cuStreamCreate");
    static std::atomic<unsigned> next_id{1};
    auto* s = new Stream("stream-" + std::to_string(next_id.fetch_add(1)));
    {
        std::lock_guard<std::mutex> lock(handles().mutex);
        handles().streams.insert(s);
    }
    *stream = reinterpret_cast<CUstream>(s);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamCreateWithPriority(CUstream* stream, unsigned int flags, int) {
    return cuStreamCreate(stream, flags);
}

EMU_EXPORT CUresult cuStreamDestroy_v2(CUstream stream) {
    if (CUresult e = check_ready()) return e;
    auto* s = reinterpret_cast<Stream*>(stream);
    {
        std::lock_guard<std::mutex> lock(handles().mutex);
        if (handles().streams.erase(s) == 0) return CUDA_ERROR_INVALID_HANDLE;
    }
    delete s;  // runs what is still queued, as the driver does after destroy returns
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = resolve_stream(stream);
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    s->synchronize();
    return sticky_error();
}

EMU_EXPORT CUresult cuStreamQuery(CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = resolve_stream(stream);
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    return s->idle() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

EMU_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags) {
    if (CUresult e = check_context()) return e;
    Stream* s = resolve_stream(stream);
    Event* ev = resolve_event(event);
    if (s == nullptr || ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (auto marker = last_marker(ev)) s->wait_for(std::move(marker));  // never recorded: no-op
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuLaunchHostFunc(CUstream stream, CUhostFn fn, void* user_data) {
    if (CUresult e = check_context()) return e;
    Stream* s = resolve_stream(stream);
    if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (fn == nullptr) return CUDA_ERROR_INVALID_VALUE;
    s->enqueue([fn, user_data] { fn(user_data); });
    return CUDA_SUCCESS;
}

// ---- events ----------------------------------------------------------------------------

EMU_EXPORT CUresult cuEventCreate(CUevent* event, unsigned int flags) {
    if (CUresult e = check_context()) return e;
    if (event == nullptr || flags > 7) return CUDA_ERROR_INVALID_VALUE;
    auto* ev = new Event();
    ev->flags = flags;
    {
        std::lock_guard<std::mutex> lock(handles().mutex);
        handles().events.insert(ev);
    }
    *event = reinterpret_cast<CUevent>(ev);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventDestroy_v2(CUevent event) {
    if (CUresult e = check_ready()) return e;
    auto* ev = reinterpret_cast<Event*>(event);
    {
        std::lock_guard<std::mutex> lock(handles().mutex);
        if (handles().events.erase(ev) == 0) return CUDA_ERROR_INVALID_HANDLE;
    }
    delete ev;  // queued waits hold the marker, not the event
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Event* ev = resolve_event(event);
    Stream* s = resolve_stream(stream);
    if (ev == nullptr || s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    auto marker = s->record();
    std::lock_guard<std::mutex> lock(ev->mutex);
    ev->last = std::move(marker);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventQuery(CUevent event) {
    if (CUresult e = check_context()) return e;
    Event* ev = resolve_event(event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    auto marker = last_marker(ev);
    return marker == nullptr || marker->done() ? sticky_error() : CUDA_ERROR_NOT_READY;
}

EMU_EXPORT CUresult cuEventSynchronize(CUevent event) {
    if (CUresult e = check_context()) return e;
    Event* ev = resolve_event(event);
    if (ev == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (auto marker = last_marker(ev)) marker->wait();
    return sticky_error();
}

EMU_EXPORT CUresult cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
    if (CUresult e = check_context()) return e;
    Event* a = resolve_event(start);
    Event* b = resolve_event(end);
    if (a == nullptr || b == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    auto ma = last_marker(a), mb = last_marker(b);
    if (ma == nullptr || mb == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (!ma->done() || !mb->done()) return CUDA_ERROR_NOT_READY;
    *ms = std::chrono::duration<float, std::milli>(mb->completed_at() - ma->completed_at()).count();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuEventElapsedTime_v2(float* ms, CUevent start, CUevent end) {
    return cuEventElapsedTime(ms, start, end);
}
