// driver_state.h — process-wide state of the emulated driver: initialisation, the one
// device's primary context, the per-thread current context, and the sticky error.
//
// As on a real device, an error raised while work executes asynchronously (a kernel that
// faulted, corrupted a buffer guard or deadlocked) is sticky: every later call returns it,
// until a test clears it through oxide_emu_set_fault.
#pragma once

#include <string>

#include "cuda_types.h"

#define EMU_EXPORT extern "C" __attribute__((visibility("default")))

namespace emu {

class Stream;

// Driver version reported by cuDriverGetVersion (OXIDE_CUDA_EMU_DRIVER_VERSION, default
// 12090); it also bounds the PTX ISA version cuModuleLoadData accepts.
int driver_version();

bool initialized();
void mark_initialized();

// CUDA_ERROR_NOT_INITIALIZED before cuInit, else the sticky error, else CUDA_SUCCESS.
CUresult check_ready();
// check_ready(), then CUDA_ERROR_INVALID_CONTEXT unless this thread has a current context.
CUresult check_context();

CUresult sticky_error();
void set_sticky_error(CUresult error, const std::string& why);
void clear_sticky_error();

// The primary context of device 0 (the emulator has one device).
CUcontext primary_context();
CUcontext current_context();
void set_current_context(CUcontext ctx);

// The legacy default stream (handles 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD).
Stream& null_stream();

// Integer environment setting, or `fallback` when unset or unparsable.
long long env_integer(const char* name, long long fallback);

}  // namespace emu
