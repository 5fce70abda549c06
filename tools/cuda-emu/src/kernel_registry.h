// kernel_registry.h — host-compiled kernels by their extern "C" name.
//
// Each kernels_*.cpp translation unit includes one .cu file of
// crates/oxidelake-device/kernels/cuda/ and registers its entry points with
// EMU_KERNEL(name). The parameter list is taken from the kernel's own C++ signature, so
// it cannot drift from the .cu source: cuLaunchKernel's `void** kernelParams` holds one
// pointer per parameter (as with a real driver), and binding copies each value out with
// the size of that parameter's type, at enqueue time.
#pragma once

#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace emu {

using KernelBody = std::function<void()>;

struct KernelEntry {
    std::string name;
    std::string source_file;
    std::vector<size_t> param_bytes;
    KernelBody (*bind)(void** params);
    std::atomic<unsigned long long> launches{0};  // launches that ran to completion
};

// Returns nullptr for a name no .cu file defines.
KernelEntry* find_kernel(const std::string& name);
// Every registered kernel, sorted by name.
std::vector<KernelEntry*> all_kernels();
// Used by EMU_KERNEL; returns true so it can initialise a static.
bool register_kernel(const char* name, const char* source_file, std::vector<size_t> param_bytes,
                     KernelBody (*bind)(void** params));

template <class T>
T load_param(const void* slot) {
    T value;
    std::memcpy(&value, slot, sizeof(T));
    return value;
}

template <class F>
struct KernelSignature;

template <class... A>
struct KernelSignature<void (*)(A...)> {
    static std::vector<size_t> param_bytes() { return {sizeof(std::decay_t<A>)...}; }

    template <void (*Fn)(A...), size_t... I>
    static KernelBody bind(void** params, std::index_sequence<I...>) {
        std::tuple<std::decay_t<A>...> args{load_param<std::decay_t<A>>(params[I])...};
        return [args] { std::apply(Fn, args); };
    }

    template <void (*Fn)(A...)>
    static KernelBody bind_params(void** params) {
        return bind<Fn>(params, std::index_sequence_for<A...>{});
    }
};

}  // namespace emu

#define EMU_KERNEL(fn)                                                                              \
    static const bool emu_registered_##fn = ::emu::register_kernel(                                 \
        #fn, EMU_KERNEL_SOURCE, ::emu::KernelSignature<decltype(&fn)>::param_bytes(),                 \
        &::emu::KernelSignature<decltype(&fn)>::template bind_params<&fn>)
