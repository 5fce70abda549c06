// driver_state.cpp — see driver_state.h.
#include "driver_state.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "stream.h"

namespace emu {
namespace {

std::atomic<bool> g_initialized{false};
std::atomic<CUresult> g_sticky{CUDA_SUCCESS};
thread_local CUcontext t_current = nullptr;

// The context handle only needs to be a unique, stable non-null address.
char g_primary_context_storage;

}  // namespace

int driver_version() {
    static const int version = static_cast<int>(env_integer("OXIDE_CUDA_EMU_DRIVER_VERSION", 12090));
    return version;
}

bool initialized() { return g_initialized.load(std::memory_order_acquire); }
void mark_initialized() { g_initialized.store(true, std::memory_order_release); }

CUresult check_ready() {
    if (!initialized()) return CUDA_ERROR_NOT_INITIALIZED;
    return g_sticky.load(std::memory_order_acquire);
}

CUresult check_context() {
    const CUresult ready = check_ready();
    if (ready != CUDA_SUCCESS) return ready;
    return t_current == nullptr ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
}

CUresult sticky_error() { return g_sticky.load(std::memory_order_acquire); }

void set_sticky_error(CUresult error, const std::string& why) {
    CUresult expected = CUDA_SUCCESS;
    if (g_sticky.compare_exchange_strong(expected, error, std::memory_order_acq_rel)) {
        std::fprintf(stderr, "cuda-emu: sticky error %d: %s\n", error, why.c_str());
    }
}

void clear_sticky_error() { g_sticky.store(CUDA_SUCCESS, std::memory_order_release); }

CUcontext primary_context() { return reinterpret_cast<CUcontext>(&g_primary_context_storage); }
CUcontext current_context() { return t_current; }
void set_current_context(CUcontext ctx) { t_current = ctx; }

Stream& null_stream() {
    static Stream* stream = new Stream("null");  // never destroyed: work may be in flight at exit
    return *stream;
}

long long env_integer(const char* name, long long fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || *text == '\0') return fallback;
    char* end = nullptr;
    const long long value = std::strtoll(text, &end, 0);
    return (end != nullptr && *end == '\0') ? value : fallback;
}

}  // namespace emu
