// trace.cpp — see trace.h.
#include "trace.h"

#include <atomic>
#include <map>
#include <mutex>

namespace emu {
namespace {

struct State {
    std::mutex mutex;
    std::map<std::string, unsigned long long> calls;
    std::atomic<bool> tracing{false};
    std::string lines;
};

State& state() {
    static State* s = new State();  // never destroyed: streams may record during exit
    return *s;
}

}  // namespace

void count_call(const char* name) {
    std::lock_guard<std::mutex> lock(state().mutex);
    ++state().calls[name];
}

unsigned long long call_count(const char* name) {
    std::lock_guard<std::mutex> lock(state().mutex);
    auto it = state().calls.find(name);
    return it == state().calls.end() ? 0 : it->second;
}

void trace_enable(bool on) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (on) state().lines.clear();
    state().tracing.store(on, std::memory_order_release);
}

bool tracing() { return state().tracing.load(std::memory_order_acquire); }

void trace_record(const std::string& stream, const std::string& label) {
    std::lock_guard<std::mutex> lock(state().mutex);
    if (!state().tracing.load(std::memory_order_relaxed)) return;
    state().lines += stream + " " + label + "\n";
}

std::string trace_text() {
    std::lock_guard<std::mutex> lock(state().mutex);
    return state().lines;
}

}  // namespace emu
