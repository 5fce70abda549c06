// driver_device.cpp — cuInit, the device (an H200 look-alike) and its primary context.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "device_runtime.h"
#include "driver_state.h"
#include "emu_api.h"
#include "faults.h"
#include "memory.h"
#include "streams_registry.h"

using namespace emu;

namespace {

std::mutex g_init_mutex;
int g_primary_refcount = 0;  // guarded by g_init_mutex

int device_count() { return static_cast<int>(env_integer("OXIDE_CUDA_EMU_DEVICES", 1)); }

CUresult check_device(CUdevice dev) { return dev >= 0 && dev < device_count() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

// The H200 SXM's values where the engine or cudarc might care; 0 for the rest.
int attribute_value(int attribute) {
    switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED: return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: return 0x19;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 6144;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return static_cast<int>(kMaxDynamicSharedBytes);
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    // cudarc uses stream-ordered allocation (cuMemAllocAsync) when pools are supported,
    // as on a real H200; OXIDE_CUDA_EMU_MEMORY_POOLS=0 exercises its cuMemAlloc path.
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        return static_cast<int>(env_integer("OXIDE_CUDA_EMU_MEMORY_POOLS", 1));
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    default: return 0;
    }
}

}  // namespace

// ---- initialisation and version ---------------------------------------------------------

EMU_EXPORT CUresult cuInit(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (initialized()) return CUDA_SUCCESS;
    if (const char* spec = std::getenv("OXIDE_CUDA_EMU_FAULT")) {
        std::string error;
        if (!set_fault_plan(spec, &error)) {
            std::fprintf(stderr, "cuda-emu: OXIDE_CUDA_EMU_FAULT ignored: %s\n", error.c_str());
        }
    }
    if (env_integer("OXIDE_CUDA_EMU_REPORT", 0) != 0) std::atexit([] { oxide_emu_report(); });
    null_stream();
    mark_initialized();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDriverGetVersion(int* version) {
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = driver_version();
    return CUDA_SUCCESS;
}

// ---- device queries --------------------------------------------------------------------

EMU_EXPORT CUresult cuDeviceGetCount(int* count) {
    if (CUresult e = check_ready()) return e;
    if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *count = device_count();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
    if (CUresult e = check_ready()) return e;
    if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = check_device(ordinal)) return e;
    *device = ordinal;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    std::snprintf(name, static_cast<size_t>(len), "%s", "NVIDIA H200 (oxidelake cuda-emu)");
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *bytes = device_total_bytes();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (value == nullptr || attribute <= 0 || attribute >= kDeviceAttributeCount) return CUDA_ERROR_INVALID_VALUE;
    *value = attribute_value(attribute);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceComputeCapability(int* major, int* minor, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (major == nullptr || minor == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *major = 9;
    *minor = 0;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
    static const char kUuid[16] = {'o', 'x', 'i', 'd', 'e', 'l', 'a', 'k', 'e', '-', 'c', 'u', 'e', 'm', 'u', '0'};
    std::memcpy(uuid->bytes, kUuid, sizeof kUuid);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

// ---- primary context -------------------------------------------------------------------

EMU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(g_init_mutex);
    ++g_primary_refcount;
    *ctx = primary_context();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    std::lock_guard<std::mutex> lock(g_init_mutex);
    if (g_primary_refcount == 0) return CUDA_ERROR_INVALID_CONTEXT;
    --g_primary_refcount;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
    if (CUresult e = check_ready()) return e;
    if (CUresult e = check_device(dev)) return e;
    if (flags == nullptr || active == nullptr) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(g_init_mutex);
    *flags = 0;
    *active = g_primary_refcount > 0 ? 1 : 0;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int) { return check_device(dev); }

// ---- current context -------------------------------------------------------------------

EMU_EXPORT CUresult cuCtxGetCurrent(CUcontext* ctx) {
    if (CUresult e = check_ready()) return e;
    if (ctx == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *ctx = current_context();
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (CUresult e = check_ready()) return e;
    if (ctx != nullptr && ctx != primary_context()) return CUDA_ERROR_INVALID_CONTEXT;
    set_current_context(ctx);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }

EMU_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* ctx) {
    if (CUresult e = check_ready()) return e;
    if (ctx != nullptr) *ctx = current_context();
    set_current_context(nullptr);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
    if (CUresult e = check_context()) return e;
    if (dev == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *dev = 0;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetApiVersion(CUcontext, unsigned int* version) {
    if (CUresult e = check_ready()) return e;
    if (version == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *version = 12080;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxGetFlags(unsigned int* flags) {
    if (CUresult e = check_context()) return e;
    if (flags == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxSetFlags(unsigned int) { return check_context(); }

EMU_EXPORT CUresult cuCtxGetStreamPriorityRange(int* least, int* greatest) {
    if (CUresult e = check_context()) return e;
    if (least != nullptr) *least = 0;
    if (greatest != nullptr) *greatest = -5;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuCtxSynchronize() {
    if (CUresult e = check_context()) return e;
    synchronize_all_streams();
    return sticky_error();
}
