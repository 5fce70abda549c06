// stubs.cpp — a weak definition of every driver symbol cudarc resolves (cudarc opens
// libcuda eagerly and panics on the first missing symbol). Implemented functions in the
// other files are strong definitions and replace these at link time; the rest report
// once on stderr and return CUDA_ERROR_NOT_SUPPORTED. Declared without parameters: the
// C calling convention lets a caller pass arguments a callee ignores.
#include <cstdio>
#include <mutex>
#include <set>
#include <string>

#include "driver_state.h"

namespace {
CUresult not_emulated(const char* name) {
    static std::mutex mutex;
    static std::set<std::string>* reported = new std::set<std::string>();
    std::lock_guard<std::mutex> lock(mutex);
    if (reported->insert(name).second) std::fprintf(stderr, "cuda-emu: %s is not emulated (CUDA_ERROR_NOT_SUPPORTED)\n", name);
    return CUDA_ERROR_NOT_SUPPORTED;
}
}  // namespace

#define EMU_STUB(name) \
    extern "C" __attribute__((weak, visibility("default"))) CUresult name() { return not_emulated(#name); }
#include "cudarc_symbols.inc"
