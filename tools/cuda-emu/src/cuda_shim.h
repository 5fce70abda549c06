// cuda_shim.h — lets the .cu files of crates/oxidelake-device/kernels/cuda/ compile as
// host C++ unchanged. Include it, then the .cu file, in one translation unit.
//
// - __global__/__device__/__host__ vanish; __forceinline__ becomes inline.
// - threadIdx/blockIdx/blockDim/gridDim read the running fiber's coordinates.
// - __shared__ becomes `thread_local`: a block's threads are fibers on one OS thread that
//   runs one block at a time, so per-OS-thread storage is exactly per-block storage.
//   `extern __shared__ T name[]` (dynamic shared memory) needs the translation unit to
//   define it with EMU_DYNAMIC_SHARED(T, name).
// - Atomics are GCC __atomic builtins, sequentially consistent (stronger than CUDA's
//   relaxed device atomics; see README "what it does not prove").
// - Warp intrinsics go through emu::dev::warp_exchange, which runs the warp in lock step.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "device_runtime.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __shared__ thread_local
// __restrict__ is a GCC/Clang keyword already.

#define threadIdx (::emu::dev::thread_idx())
#define blockIdx (::emu::dev::block_idx())
#define blockDim (::emu::dev::block_dim())
#define gridDim (::emu::dev::grid_dim())
#define warpSize 32

#define EMU_DYNAMIC_SHARED(type, name) \
    alignas(16) thread_local type name[::emu::kMaxDynamicSharedBytes / sizeof(type)]

// ---- barriers and fences -------------------------------------------------------------

inline void __syncthreads() { ::emu::dev::sync_threads(); }
#if defined(__SANITIZE_THREAD__)
// TSan does not model standalone fences; the shim's atomics are sequentially consistent,
// so TSan judges ordering by them alone (a fence-only protocol would be reported).
inline void __threadfence() {}
#else
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#endif
inline void __threadfence_block() { __threadfence(); }
inline void __threadfence_system() { __threadfence(); }

// ---- bit reinterpretation and bit counting -------------------------------------------

namespace emu_shim {
template <class To, class From>
inline To bit_cast(From from) {
    static_assert(sizeof(To) == sizeof(From), "size mismatch");
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
}
}  // namespace emu_shim

inline long long __double_as_longlong(double v) { return emu_shim::bit_cast<long long>(v); }
inline double __longlong_as_double(long long v) { return emu_shim::bit_cast<double>(v); }
inline int __float_as_int(float v) { return emu_shim::bit_cast<int>(v); }
inline float __int_as_float(int v) { return emu_shim::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return emu_shim::bit_cast<unsigned>(v); }
inline float __uint_as_float(unsigned v) { return emu_shim::bit_cast<float>(v); }
// Round-to-nearest double arithmetic, never contracted into an FMA (x86-64 without
// -mfma has no FMA instruction to contract into).
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __popcll(unsigned long long v) { return __builtin_popcountll(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __ffsll(long long v) { return __builtin_ffsll(v); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __clzll(long long v) { return v == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(v)); }

// ---- atomics ---------------------------------------------------------------------------

#define EMU_ATOMIC_INT_OPS(T)                                                                      \
    inline T atomicAdd(T* p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }            \
    inline T atomicSub(T* p, T v) { return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); }            \
    inline T atomicExch(T* p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }          \
    inline T atomicAnd(T* p, T v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }            \
    inline T atomicOr(T* p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }              \
    inline T atomicXor(T* p, T v) { return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); }            \
    inline T atomicCAS(T* p, T expected, T desired) {                                              \
        __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
        return expected;                                                                           \
    }                                                                                              \
    inline T atomicMin(T* p, T v) {                                                                \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                              \
        while (v < old &&                                                                          \
               !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
        }                                                                                          \
        return old;                                                                                \
    }                                                                                              \
    inline T atomicMax(T* p, T v) {                                                                \
        T old = __atomic_load_n(p, __ATOMIC_SEQ_CST);                                              \
        while (v > old &&                                                                          \
               !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) { \
        }                                                                                          \
        return old;                                                                                \
    }

EMU_ATOMIC_INT_OPS(int)
EMU_ATOMIC_INT_OPS(unsigned int)
EMU_ATOMIC_INT_OPS(long long)
EMU_ATOMIC_INT_OPS(unsigned long long)
#undef EMU_ATOMIC_INT_OPS

namespace emu_shim {
// Floating-point read-modify-write as CUDA does it without a native instruction: a
// compare-and-swap loop on the value's integer image.
template <class F, class I, class Op>
inline F atomic_float_rmw(F* p, Op op) {
    I* bits = reinterpret_cast<I*>(p);
    I old = __atomic_load_n(bits, __ATOMIC_SEQ_CST);
    for (;;) {
        const I desired = bit_cast<I>(op(bit_cast<F>(old)));
        if (__atomic_compare_exchange_n(bits, &old, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            return bit_cast<F>(old);
        }
    }
}
}  // namespace emu_shim

inline double atomicAdd(double* p, double v) {
    return emu_shim::atomic_float_rmw<double, unsigned long long>(p, [v](double old) { return old + v; });
}
inline float atomicAdd(float* p, float v) {
    return emu_shim::atomic_float_rmw<float, unsigned int>(p, [v](float old) { return old + v; });
}
inline float atomicExch(float* p, float v) {
    return emu_shim::bit_cast<float>(atomicExch(reinterpret_cast<unsigned int*>(p), emu_shim::bit_cast<unsigned>(v)));
}

// ---- warp intrinsics -------------------------------------------------------------------

namespace emu_shim {
template <class T>
inline uint64_t to_lane_bits(T v) {
    static_assert(sizeof(T) <= 8, "warp shuffles move at most 8 bytes");
    uint64_t bits = 0;
    std::memcpy(&bits, &v, sizeof v);
    return bits;
}
template <class T>
inline T from_lane_bits(uint64_t bits) {
    T v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}
// Reads lane `src` of the exchange; a lane outside the caller's segment of `width`
// lanes, or one that did not take part, yields the caller's own value (CUDA semantics
// for out-of-range shuffles).
template <class T>
inline T shuffle_read(const ::emu::dev::WarpValues& w, T own, int src, int width) {
    const int base = static_cast<int>(w.lane) & ~(width - 1);
    if (src < base || src >= base + width || src < 0 || src > 31) return own;
    if ((w.arrived & (1u << src)) == 0) return own;
    return from_lane_bits<T>(w.values[src]);
}
}  // namespace emu_shim

template <class T>
inline T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, emu_shim::to_lane_bits(var), &w);
    const int base = static_cast<int>(w.lane) & ~(width - 1);
    return emu_shim::shuffle_read(w, var, base + (src_lane & (width - 1)), width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, emu_shim::to_lane_bits(var), &w);
    return emu_shim::shuffle_read(w, var, static_cast<int>(w.lane) - static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, emu_shim::to_lane_bits(var), &w);
    return emu_shim::shuffle_read(w, var, static_cast<int>(w.lane) + static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, emu_shim::to_lane_bits(var), &w);
    return emu_shim::shuffle_read(w, var, static_cast<int>(w.lane) ^ lane_mask, width);
}
inline unsigned __ballot_sync(unsigned mask, int predicate) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, predicate != 0 ? 1 : 0, &w);
    unsigned ballot = 0;
    for (unsigned lane = 0; lane < 32; ++lane) {
        if ((w.arrived & mask & (1u << lane)) && w.values[lane] != 0) ballot |= 1u << lane;
    }
    return ballot;
}
inline int __all_sync(unsigned mask, int predicate) {
    return __ballot_sync(mask, predicate) == (__ballot_sync(mask, 1));
}
inline int __any_sync(unsigned mask, int predicate) { return __ballot_sync(mask, predicate) != 0; }
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    ::emu::dev::WarpValues w;
    ::emu::dev::warp_exchange(mask, 0, &w);
}
