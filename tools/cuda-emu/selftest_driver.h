// selftest_driver.h — the self-test's view of the driver: dlopen()ed by path and resolved
// symbol by symbol, as cudarc does, plus small helpers. Uses only the driver API and the
// exported oxide_emu_* functions; nothing of the emulator's internals.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "src/cuda_types.h"

#define DRIVER_FUNCTIONS(X)                                                                         \
    X(cuInit, CUresult (*)(unsigned))                                                               \
    X(cuDriverGetVersion, CUresult (*)(int*))                                                       \
    X(cuDeviceGetCount, CUresult (*)(int*))                                                         \
    X(cuDeviceGet, CUresult (*)(CUdevice*, int))                                                    \
    X(cuDeviceGetName, CUresult (*)(char*, int, CUdevice))                                          \
    X(cuDeviceGetAttribute, CUresult (*)(int*, int, CUdevice))                                      \
    X(cuDeviceTotalMem_v2, CUresult (*)(size_t*, CUdevice))                                         \
    X(cuDevicePrimaryCtxRetain, CUresult (*)(CUcontext*, CUdevice))                                 \
    X(cuDevicePrimaryCtxRelease_v2, CUresult (*)(CUdevice))                                         \
    X(cuCtxSetCurrent, CUresult (*)(CUcontext))                                                     \
    X(cuCtxGetCurrent, CUresult (*)(CUcontext*))                                                    \
    X(cuCtxSynchronize, CUresult (*)())                                                             \
    X(cuMemGetInfo_v2, CUresult (*)(size_t*, size_t*))                                              \
    X(cuMemAlloc_v2, CUresult (*)(CUdeviceptr*, size_t))                                            \
    X(cuMemFree_v2, CUresult (*)(CUdeviceptr))                                                      \
    X(cuMemAllocAsync, CUresult (*)(CUdeviceptr*, size_t, CUstream))                                \
    X(cuMemFreeAsync, CUresult (*)(CUdeviceptr, CUstream))                                          \
    X(cuMemHostAlloc, CUresult (*)(void**, size_t, unsigned))                                       \
    X(cuMemFreeHost, CUresult (*)(void*))                                                           \
    X(cuMemcpyHtoD_v2, CUresult (*)(CUdeviceptr, const void*, size_t))                              \
    X(cuMemcpyDtoH_v2, CUresult (*)(void*, CUdeviceptr, size_t))                                    \
    X(cuMemcpyDtoD_v2, CUresult (*)(CUdeviceptr, CUdeviceptr, size_t))                              \
    X(cuMemcpyHtoDAsync_v2, CUresult (*)(CUdeviceptr, const void*, size_t, CUstream))               \
    X(cuMemcpyDtoHAsync_v2, CUresult (*)(void*, CUdeviceptr, size_t, CUstream))                     \
    X(cuMemsetD8Async, CUresult (*)(CUdeviceptr, unsigned char, size_t, CUstream))                  \
    X(cuMemsetD8_v2, CUresult (*)(CUdeviceptr, unsigned char, size_t))                              \
    X(cuPointerGetAttribute, CUresult (*)(void*, int, CUdeviceptr))                                 \
    X(cuStreamCreate, CUresult (*)(CUstream*, unsigned))                                            \
    X(cuStreamDestroy_v2, CUresult (*)(CUstream))                                                   \
    X(cuStreamSynchronize, CUresult (*)(CUstream))                                                  \
    X(cuStreamWaitEvent, CUresult (*)(CUstream, CUevent, unsigned))                                 \
    X(cuLaunchHostFunc, CUresult (*)(CUstream, CUhostFn, void*))                                    \
    X(cuEventCreate, CUresult (*)(CUevent*, unsigned))                                              \
    X(cuEventDestroy_v2, CUresult (*)(CUevent))                                                     \
    X(cuEventRecord, CUresult (*)(CUevent, CUstream))                                               \
    X(cuEventQuery, CUresult (*)(CUevent))                                                          \
    X(cuEventSynchronize, CUresult (*)(CUevent))                                                    \
    X(cuModuleLoadData, CUresult (*)(CUmodule*, const void*))                                       \
    X(cuModuleUnload, CUresult (*)(CUmodule))                                                       \
    X(cuModuleGetFunction, CUresult (*)(CUfunction*, CUmodule, const char*))                        \
    X(cuFuncSetAttribute, CUresult (*)(CUfunction, int, int))                                       \
    X(cuLaunchKernel, CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,    \
                                   unsigned, unsigned, CUstream, void**, void**))                   \
    X(cuGetErrorName, CUresult (*)(CUresult, const char**))                                         \
    X(cuGetErrorString, CUresult (*)(CUresult, const char**))                                       \
    X(cuGraphLaunch, CUresult (*)(void*, CUstream))                                                 \
    X(oxide_emu_set_fault, int (*)(const char*))                                                    \
    X(oxide_emu_launch_count, unsigned long long (*)(const char*))                                  \
    X(oxide_emu_report, void (*)())

struct Driver {
#define DECLARE(name, type) \
    using name##_fn = type; \
    name##_fn name = nullptr;
    DRIVER_FUNCTIONS(DECLARE)
#undef DECLARE
    void* library = nullptr;

    // Opens `path` and resolves every symbol; exits with a message on the first missing one.
    explicit Driver(const char* path) {
        library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (library == nullptr) {
            std::fprintf(stderr, "dlopen(%s): %s\n", path, dlerror());
            std::exit(2);
        }
#define RESOLVE(name, type)                                                \
    name = reinterpret_cast<type>(dlsym(library, #name));                  \
    if (name == nullptr) {                                                 \
        std::fprintf(stderr, "missing symbol %s in %s\n", #name, path);    \
        std::exit(2);                                                      \
    }
        DRIVER_FUNCTIONS(RESOLVE)
#undef RESOLVE
    }

    std::string error_name(CUresult r) const {
        const char* name = nullptr;
        cuGetErrorName(r, &name);
        return name != nullptr ? name : "CUresult " + std::to_string(r);
    }
};

// A device buffer holding a copy of a host vector (or `n` poisoned elements).
template <class T>
CUdeviceptr upload(const Driver& d, const std::vector<T>& host) {
    CUdeviceptr p = 0;
    const size_t bytes = host.empty() ? 1 : host.size() * sizeof(T);
    if (d.cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) std::abort();
    if (!host.empty() && d.cuMemcpyHtoD_v2(p, host.data(), bytes) != CUDA_SUCCESS) std::abort();
    return p;
}

template <class T>
CUdeviceptr zeros(const Driver& d, size_t n) {
    CUdeviceptr p = 0;
    const size_t bytes = (n == 0 ? 1 : n) * sizeof(T);
    if (d.cuMemAlloc_v2(&p, bytes) != CUDA_SUCCESS) std::abort();
    if (d.cuMemsetD8_v2(p, 0, bytes) != CUDA_SUCCESS) std::abort();
    return p;
}

template <class T>
std::vector<T> download(const Driver& d, CUdeviceptr p, size_t n) {
    std::vector<T> host(n);
    if (n > 0 && d.cuMemcpyDtoH_v2(host.data(), p, n * sizeof(T)) != CUDA_SUCCESS) host.clear();
    return host;
}
