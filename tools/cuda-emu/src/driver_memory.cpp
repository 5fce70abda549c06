// driver_memory.cpp — allocation, copies, memsets and pointer queries.
//
// Copy semantics follow the driver's rules for asynchronous copies: host->device from
// pageable memory is staged at the call (the caller may reuse its buffer on return),
// device->host into pageable memory completes before the call returns, and only copies
// touching pinned memory stay asynchronous. The blocking cuMemcpy* variants run on the
// null stream and wait.
#include <cstring>
#include <memory>
#include <vector>

#include "driver_state.h"
#include "faults.h"
#include "memory.h"
#include "streams_registry.h"

using namespace emu;

namespace {

void* host_ptr(CUdeviceptr p) { return reinterpret_cast<void*>(p); }

CUresult resolve(CUstream handle, Stream** out) {
    *out = resolve_stream(handle);
    return *out == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult alloc_checked(CUdeviceptr* dptr, size_t bytes) {
    if (CUresult e = check_context()) return e;
    if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Alloc)) return e;
    return device_alloc(bytes, dptr);
}

CUresult htod(CUdeviceptr dst, const void* src, size_t bytes, Stream& stream, bool blocking) {
    if (!device_range_valid(dst, bytes) || (bytes > 0 && src == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Copy)) return e;
    if (bytes == 0) return CUDA_SUCCESS;
    if (pinned_range_valid(src, bytes) && !blocking) {
        stream.enqueue([dst, src, bytes] { std::memcpy(host_ptr(dst), src, bytes); }, false, "h2d");
        return CUDA_SUCCESS;
    }
    auto staged = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    stream.enqueue([dst, staged] { std::memcpy(host_ptr(dst), staged->data(), staged->size()); }, false,
                   "h2d");
    if (blocking) stream.synchronize();
    return blocking ? sticky_error() : CUDA_SUCCESS;
}

CUresult dtoh(void* dst, CUdeviceptr src, size_t bytes, Stream& stream, bool blocking) {
    if (!device_range_valid(src, bytes) || (bytes > 0 && dst == nullptr)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Copy)) return e;
    if (bytes == 0) return CUDA_SUCCESS;
    stream.enqueue([dst, src, bytes] { std::memcpy(dst, host_ptr(src), bytes); }, false, "d2h");
    if (blocking || !pinned_range_valid(dst, bytes)) {
        stream.synchronize();
        return sticky_error();
    }
    return CUDA_SUCCESS;
}

CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, Stream& stream, bool blocking) {
    if (!device_range_valid(dst, bytes) || !device_range_valid(src, bytes)) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Copy)) return e;
    if (bytes == 0) return CUDA_SUCCESS;
    stream.enqueue([dst, src, bytes] { std::memmove(host_ptr(dst), host_ptr(src), bytes); }, false, "d2d");
    if (blocking) stream.synchronize();
    return blocking ? sticky_error() : CUDA_SUCCESS;
}

template <class T>
CUresult memset_n(CUdeviceptr dst, T value, size_t count, Stream& stream, bool blocking) {
    if (!device_range_valid(dst, count * sizeof(T))) return CUDA_ERROR_INVALID_VALUE;
    if (count == 0) return CUDA_SUCCESS;
    stream.enqueue([dst, value, count] {
        T* p = static_cast<T*>(host_ptr(dst));
        for (size_t i = 0; i < count; ++i) p[i] = value;
    });
    if (blocking) stream.synchronize();
    return blocking ? sticky_error() : CUDA_SUCCESS;
}

}  // namespace

// ---- device memory ---------------------------------------------------------------------

EMU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
    if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    return alloc_checked(dptr, bytes);
}

EMU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    if (CUresult e = check_context()) return e;
    if (dptr == 0) return CUDA_SUCCESS;
    // cuMemFree synchronises with work that may still use the memory.
    synchronize_all_streams();
    return device_free(dptr);
}

// Stream-ordered allocation: the memory exists at once (host memory), the free happens
// when the stream reaches it, so work queued before the free still sees valid memory.
EMU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream) {
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    if (bytes == 0) {
        if (CUresult e = check_context()) return e;
        if (dptr == nullptr) return CUDA_ERROR_INVALID_VALUE;
        *dptr = 0;
        return CUDA_SUCCESS;
    }
    return alloc_checked(dptr, bytes);
}

EMU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    if (dptr == 0) return CUDA_SUCCESS;
    if (find_range(dptr).kind != MemoryKind::Device) return CUDA_ERROR_INVALID_VALUE;
    s->enqueue([dptr] { device_free(dptr); }, /*always_run=*/true);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
    if (CUresult e = check_context()) return e;
    if (free_bytes == nullptr || total_bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *total_bytes = device_total_bytes();
    *free_bytes = fault_oom_active() ? 0 : device_total_bytes() - device_used_bytes();
    return CUDA_SUCCESS;
}

// ---- pinned host memory ----------------------------------------------------------------

EMU_EXPORT CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned int flags) {
    if (CUresult e = check_context()) return e;
    if (pp == nullptr || flags > 0xF) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::HostAlloc)) return e;
    return pinned_alloc(bytes, pp);
}

EMU_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t bytes) { return cuMemHostAlloc(pp, bytes, 0); }

EMU_EXPORT CUresult cuMemFreeHost(void* p) {
    if (CUresult e = check_context()) return e;
    return pinned_free(p);
}

EMU_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* dptr, void* p, unsigned int flags) {
    if (CUresult e = check_context()) return e;
    if (dptr == nullptr || flags != 0 || !pinned_range_valid(p, 1)) return CUDA_ERROR_INVALID_VALUE;
    *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
    return CUDA_SUCCESS;
}

// ---- copies ----------------------------------------------------------------------------

EMU_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
    if (CUresult e = check_context()) return e;
    return htod(dst, src, bytes, null_stream(), true);
}

EMU_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
    if (CUresult e = check_context()) return e;
    return dtoh(dst, src, bytes, null_stream(), true);
}

EMU_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    if (CUresult e = check_context()) return e;
    return dtod(dst, src, bytes, null_stream(), true);
}

EMU_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    return htod(dst, src, bytes, *s, false);
}

EMU_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    return dtoh(dst, src, bytes, *s, false);
}

EMU_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    return dtod(dst, src, bytes, *s, false);
}

// ---- memsets ---------------------------------------------------------------------------

EMU_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char value, size_t count) {
    if (CUresult e = check_context()) return e;
    return memset_n<unsigned char>(dst, value, count, null_stream(), true);
}

EMU_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t count, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    return memset_n<unsigned char>(dst, value, count, *s, false);
}

EMU_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int value, size_t count) {
    if (CUresult e = check_context()) return e;
    return memset_n<unsigned int>(dst, value, count, null_stream(), true);
}

EMU_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int value, size_t count, CUstream stream) {
    if (CUresult e = check_context()) return e;
    Stream* s = nullptr;
    if (CUresult e = resolve(stream, &s)) return e;
    return memset_n<unsigned int>(dst, value, count, *s, false);
}

// ---- pointer queries -------------------------------------------------------------------

EMU_EXPORT CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
    if (CUresult e = check_ready()) return e;
    if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const MemoryRange r = find_range(ptr);
    if (r.kind == MemoryKind::None) return CUDA_ERROR_INVALID_VALUE;
    const bool device = r.kind == MemoryKind::Device;
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *static_cast<CUcontext*>(data) = primary_context(); break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *static_cast<unsigned*>(data) = device ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *static_cast<CUdeviceptr*>(data) = ptr; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (device) return CUDA_ERROR_INVALID_VALUE;
        *static_cast<void**>(data) = host_ptr(ptr);
        break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *static_cast<unsigned long long*>(data) = r.id; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *static_cast<int*>(data) = 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *static_cast<CUdeviceptr*>(data) = r.base; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *static_cast<size_t*>(data) = r.bytes; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *static_cast<int*>(data) = 1; break;
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}
