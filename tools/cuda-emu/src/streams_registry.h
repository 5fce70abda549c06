// streams_registry.h — CUstream / CUevent handles to emulator objects, validated: a
// destroyed or made-up handle is CUDA_ERROR_INVALID_HANDLE, not a crash.
#pragma once

#include "cuda_types.h"
#include "stream.h"

namespace emu {

// Resolves a stream handle (0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are the null
// stream); nullptr for an unknown handle.
Stream* resolve_stream(CUstream handle);

// Waits for every stream, including the null stream, to drain.
void synchronize_all_streams();

}  // namespace emu
