// driver_module.cpp — modules, functions and kernel launches.
//
// cuModuleLoadData takes the PTX NVRTC produced and keeps only its entry names (and
// parameter sizes); cuModuleGetFunction binds an entry to the host-compiled kernel of
// the same name; cuLaunchKernel copies the arguments at once, by the kernel's signature,
// and queues the grid on the stream.
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "driver_state.h"
#include "faults.h"
#include "grid.h"
#include "kernel_registry.h"
#include "memory.h"
#include "ptx_scan.h"
#include "streams_registry.h"

using namespace emu;

namespace {

struct Function;

struct Module {
    PtxModule ptx;
    std::map<std::string, std::unique_ptr<Function>> functions;  // resolved so far
};

struct Function {
    KernelEntry* kernel = nullptr;
    size_t max_dynamic_shared_bytes = kDefaultDynamicSharedBytes;
};

struct Handles {
    std::mutex mutex;
    std::set<Module*> modules;
    std::set<Function*> functions;
};

Handles& handles() {
    static Handles* h = new Handles();
    return *h;
}

Function* resolve_function(CUfunction handle) {
    auto* f = reinterpret_cast<Function*>(handle);
    std::lock_guard<std::mutex> lock(handles().mutex);
    return handles().functions.count(f) != 0 ? f : nullptr;
}

std::string dims(unsigned x, unsigned y, unsigned z) {
    return "(" + std::to_string(x) + "," + std::to_string(y) + "," + std::to_string(z) + ")";
}

CUresult load_module(CUmodule* out, const void* image) {
    if (CUresult e = check_context()) return e;
    if (out == nullptr || image == nullptr) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Module)) return e;
    const auto* bytes = static_cast<const unsigned char*>(image);
    if (bytes[0] == 0x7f && bytes[1] == 'E') {
        std::fprintf(stderr, "cuda-emu: cuModuleLoadData got a cubin; only PTX text is emulated\n");
        return CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    auto module = std::make_unique<Module>();
    if (!scan_ptx(static_cast<const char*>(image), &module->ptx)) return CUDA_ERROR_INVALID_PTX;
    const int max_isa = max_ptx_isa_for_driver(driver_version());
    if (module->ptx.isa_version > max_isa) {
        std::fprintf(stderr, "cuda-emu: PTX ISA %d.%d is newer than driver %d accepts (%d.%d)\n",
                     module->ptx.isa_version / 10, module->ptx.isa_version % 10, driver_version(),
                     max_isa / 10, max_isa % 10);
        return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
    }
    if (module->ptx.target_sm > 90) return CUDA_ERROR_NO_BINARY_FOR_GPU;  // sm_90 device
    Module* raw = module.release();
    std::lock_guard<std::mutex> lock(handles().mutex);
    handles().modules.insert(raw);
    *out = reinterpret_cast<CUmodule>(raw);
    return CUDA_SUCCESS;
}

}  // namespace

EMU_EXPORT CUresult cuModuleLoadData(CUmodule* module, const void* image) { return load_module(module, image); }

EMU_EXPORT CUresult cuModuleLoadDataEx(CUmodule* module, const void* image, unsigned int, void*, void**) {
    return load_module(module, image);
}

EMU_EXPORT CUresult cuModuleUnload(CUmodule handle) {
    if (CUresult e = check_ready()) return e;
    auto* module = reinterpret_cast<Module*>(handle);
    std::lock_guard<std::mutex> lock(handles().mutex);
    if (handles().modules.erase(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
    for (auto& [name, f] : module->functions) handles().functions.erase(f.get());
    delete module;
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuModuleGetFunction(CUfunction* out, CUmodule handle, const char* name) {
    if (CUresult e = check_context()) return e;
    if (out == nullptr || name == nullptr) return CUDA_ERROR_INVALID_VALUE;
    auto* module = reinterpret_cast<Module*>(handle);
    std::lock_guard<std::mutex> lock(handles().mutex);
    if (handles().modules.count(module) == 0) return CUDA_ERROR_INVALID_HANDLE;
    auto existing = module->functions.find(name);
    if (existing != module->functions.end()) {
        *out = reinterpret_cast<CUfunction>(existing->second.get());
        return CUDA_SUCCESS;
    }
    const PtxEntry* entry = nullptr;
    for (const PtxEntry& e : module->ptx.entries) {
        if (e.name == name) entry = &e;
    }
    if (entry == nullptr) return CUDA_ERROR_NOT_FOUND;
    KernelEntry* kernel = find_kernel(name);
    if (kernel == nullptr) {
        std::fprintf(stderr, "cuda-emu: kernel '%s' is in the PTX but has no host build (add EMU_KERNEL)\n", name);
        return CUDA_ERROR_NOT_FOUND;
    }
    if (!entry->param_bytes.empty() && entry->param_bytes != kernel->param_bytes) {
        std::fprintf(stderr, "cuda-emu: kernel '%s': the PTX's parameters differ from the host build's\n", name);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    auto function = std::make_unique<Function>();
    function->kernel = kernel;
    Function* raw = function.get();
    module->functions[name] = std::move(function);
    handles().functions.insert(raw);
    *out = reinterpret_cast<CUfunction>(raw);
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncGetAttribute(int* value, int attribute, CUfunction handle) {
    if (CUresult e = check_context()) return e;
    Function* f = resolve_function(handle);
    if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
    switch (attribute) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *value = 1024; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *value = static_cast<int>(f->max_dynamic_shared_bytes); break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *value = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *value = 90; break;
    default: *value = 0; break;
    }
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuFuncSetAttribute(CUfunction handle, int attribute, int value) {
    if (CUresult e = check_context()) return e;
    Function* f = resolve_function(handle);
    if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        if (value < 0 || static_cast<size_t>(value) > kMaxDynamicSharedBytes) return CUDA_ERROR_INVALID_VALUE;
        f->max_dynamic_shared_bytes = static_cast<size_t>(value);
    }
    return CUDA_SUCCESS;
}

EMU_EXPORT CUresult cuLaunchKernel(CUfunction handle, unsigned grid_x, unsigned grid_y, unsigned grid_z,
                                   unsigned block_x, unsigned block_y, unsigned block_z, unsigned shared_bytes,
                                   CUstream stream_handle, void** params, void** extra) {
    if (CUresult e = check_context()) return e;
    Function* f = resolve_function(handle);
    Stream* stream = resolve_stream(stream_handle);
    if (f == nullptr || stream == nullptr) return CUDA_ERROR_INVALID_HANDLE;
    if (extra != nullptr) return CUDA_ERROR_NOT_SUPPORTED;  // CU_LAUNCH_PARAM_* packing
    KernelEntry* kernel = f->kernel;
    const unsigned long long threads = 1ull * block_x * block_y * block_z;
    if (grid_x == 0 || grid_y == 0 || grid_z == 0 || grid_y > 65535 || grid_z > 65535 || grid_x > 2147483647u ||
        threads == 0 || threads > 1024 || block_x > 1024 || block_y > 1024 || block_z > 64) {
        std::fprintf(stderr, "cuda-emu: %s: invalid launch grid %s block %s\n", kernel->name.c_str(),
                     dims(grid_x, grid_y, grid_z).c_str(), dims(block_x, block_y, block_z).c_str());
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (shared_bytes > f->max_dynamic_shared_bytes) {
        std::fprintf(stderr, "cuda-emu: %s: %u bytes of dynamic shared memory exceed the function's limit %zu\n",
                     kernel->name.c_str(), shared_bytes, f->max_dynamic_shared_bytes);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (params == nullptr && !kernel->param_bytes.empty()) return CUDA_ERROR_INVALID_VALUE;
    if (CUresult e = fault_for(FaultSite::Launch)) return e;
    const CUresult injected = fault_for(FaultSite::Kernel);

    LaunchShape shape;
    shape.grid = Dim3{grid_x, grid_y, grid_z};
    shape.block = Dim3{block_x, block_y, block_z};
    shape.dynamic_shared_bytes = shared_bytes;
    KernelBody body = kernel->bind(params);  // argument values captured now, as CUDA does
    stream->enqueue([kernel, shape, body = std::move(body), injected] {
        if (injected != CUDA_SUCCESS) {
            set_sticky_error(injected, "injected fault while " + kernel->name + " ran");
            return;
        }
        std::string error = run_grid(shape, body);
        if (!error.empty()) {
            set_sticky_error(CUDA_ERROR_LAUNCH_FAILED, kernel->name + ": " + error);
            return;
        }
        error = check_device_guards();
        if (!error.empty()) {
            set_sticky_error(CUDA_ERROR_ILLEGAL_ADDRESS, kernel->name + ": " + error);
            return;
        }
        kernel->launches.fetch_add(1, std::memory_order_relaxed);
    }, false, "launch " + kernel->name);
    return CUDA_SUCCESS;
}
