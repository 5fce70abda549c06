// memory.h — "device" and pinned host allocations, both plain host memory.
//
// Device allocations are 256-byte aligned like cuMemAlloc's, filled with a poison byte
// (0xA5) instead of zeros so reads of memory nobody wrote show up, and framed by 1 KiB guard
// bytes checked after every kernel and at free: a kernel writing past its buffer fails the
// launch with CUDA_ERROR_ILLEGAL_ADDRESS instead of corrupting a neighbour silently. Freed
// memory is poisoned (0xDB) before it is returned to the host allocator.
//
// Copies and memsets are checked against this map: a device range must lie inside one
// live allocation. Pinned host memory is tracked so asynchronous copies can tell pinned
// (truly asynchronous) from pageable (staged or synchronous) host buffers, as the driver
// does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda_types.h"

namespace emu {

enum class MemoryKind { None, Device, PinnedHost };

struct MemoryRange {
    MemoryKind kind = MemoryKind::None;
    uint64_t base = 0;
    size_t bytes = 0;
    unsigned long long id = 0;
};

// Total device memory reported (OXIDE_CUDA_EMU_TOTAL_MEM_BYTES, default the H200's
// 143771 MiB). Allocations beyond it fail with CUDA_ERROR_OUT_OF_MEMORY.
size_t device_total_bytes();
size_t device_used_bytes();

CUresult device_alloc(size_t bytes, CUdeviceptr* out);
CUresult device_free(CUdeviceptr ptr);
// Whether [ptr, ptr + bytes) lies inside one live device allocation.
bool device_range_valid(uint64_t ptr, size_t bytes);

CUresult pinned_alloc(size_t bytes, void** out);
CUresult pinned_free(void* ptr);
// Whether [ptr, ptr + bytes) lies inside one pinned allocation.
bool pinned_range_valid(const void* ptr, size_t bytes);

// The allocation containing `ptr`, if any.
MemoryRange find_range(uint64_t ptr);

// "" when every live device allocation's guard bytes are intact, else which is not.
std::string check_device_guards();

}  // namespace emu
