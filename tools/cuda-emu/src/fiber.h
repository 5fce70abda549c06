// fiber.h — user-space context switching for CUDA threads.
//
// Every CUDA thread of a running block is a fiber: a small stack of its own, switched to
// and from by the block scheduler on one OS thread. A switch costs a few nanoseconds
// (x86-64: callee-saved registers + stack pointer; elsewhere: ucontext), so __syncthreads
// and warp shuffles stay cheap even for 800k-thread grids.
//
// Under ThreadSanitizer every fiber is also a TSan fiber, and switches do *not* imply
// synchronisation: races between CUDA threads stay visible. The block scheduler adds the
// happens-before edges CUDA guarantees (barriers, kernel start and end) with
// race_release / race_acquire.
#pragma once

#include <cstddef>

#if defined(__SANITIZE_THREAD__)
#define EMU_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EMU_TSAN 1
#endif
#endif

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace emu {

struct Fiber {
    void* sp = nullptr;           // saved stack pointer while switched out (x86-64)
    void* stack = nullptr;        // mmap'd region, lowest page a guard page
    size_t stack_bytes = 0;
    void* tsan_fiber = nullptr;   // TSan's context for this fiber (TSan builds only)
#if !defined(__x86_64__)
    ucontext_t context;
#endif
};

// Stack bytes per CUDA thread (larger under TSan, whose frames are bigger).
size_t fiber_stack_bytes();

// Gives `fiber` a stack (and a TSan context). Call once; fiber_release frees both.
void fiber_allocate(Fiber& fiber);
void fiber_release(Fiber& fiber);

// Makes the next switch to `fiber` start `entry` on a fresh stack. `entry` never returns:
// it ends by switching away.
void fiber_prepare(Fiber& fiber, void (*entry)());

// Describes the calling OS thread's own stack, to switch back to.
void fiber_adopt_current_thread(Fiber& fiber);

// Saves the running context into `from` and resumes `to`.
void fiber_switch(Fiber& from, Fiber& to);

// TSan happens-before annotations; no-ops in normal builds.
void race_release(const void* addr);
void race_acquire(const void* addr);

}  // namespace emu
