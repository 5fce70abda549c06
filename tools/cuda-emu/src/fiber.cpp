// fiber.cpp — stacks and context switches for fibers (see fiber.h).
#include "fiber.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(EMU_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

#if defined(__x86_64__)
// emu_fiber_switch(void** save_sp, void* new_sp): pushes the callee-saved registers and
// the SSE/x87 control words, saves rsp, loads the other stack and pops its registers.
asm(R"(
    .text
    .globl emu_fiber_switch
    .hidden emu_fiber_switch
    .type emu_fiber_switch,@function
emu_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $16, %rsp
    stmxcsr 8(%rsp)
    fnstcw (%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr 8(%rsp)
    fldcw (%rsp)
    addq $16, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_fiber_switch, .-emu_fiber_switch
    .section .note.GNU-stack,"",@progbits
    .text
)");
extern "C" void emu_fiber_switch(void** save_sp, void* new_sp);
#endif

namespace emu {

namespace {
size_t page_bytes() {
    static const size_t bytes = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return bytes;
}
}  // namespace

size_t fiber_stack_bytes() {
#if defined(EMU_TSAN)
    return 256 * 1024;
#else
    return 64 * 1024;
#endif
}

void fiber_allocate(Fiber& fiber) {
    const size_t bytes = fiber_stack_bytes() + page_bytes();
    void* stack = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (stack == MAP_FAILED) {
        std::fprintf(stderr, "cuda-emu: cannot map a %zu-byte fiber stack\n", bytes);
        std::abort();
    }
    mprotect(stack, page_bytes(), PROT_NONE);  // overflow faults instead of corrupting
    fiber.stack = stack;
    fiber.stack_bytes = bytes;
#if defined(EMU_TSAN)
    fiber.tsan_fiber = __tsan_create_fiber(0);
#endif
}

void fiber_release(Fiber& fiber) {
#if defined(EMU_TSAN)
    if (fiber.tsan_fiber != nullptr) __tsan_destroy_fiber(fiber.tsan_fiber);
    fiber.tsan_fiber = nullptr;
#endif
    if (fiber.stack != nullptr) munmap(fiber.stack, fiber.stack_bytes);
    fiber.stack = nullptr;
}

void fiber_prepare(Fiber& fiber, void (*entry)()) {
#if defined(__x86_64__)
    // Frame the switch pops: [x87 cw, mxcsr][r15 r14 r13 r12 rbx rbp][return = entry][0].
    // After `ret` rsp points at the 0 slot, 16-byte aligned + 8, as at a call.
    auto top = reinterpret_cast<uintptr_t>(fiber.stack) + fiber.stack_bytes;
    top &= ~static_cast<uintptr_t>(15);
    auto* words = reinterpret_cast<uint64_t*>(top);
    words[-1] = 0;                                        // fake return address of entry
    words[-2] = reinterpret_cast<uint64_t>(entry);        // popped by `ret`
    for (int i = 3; i <= 8; ++i) words[-i] = 0;           // rbp rbx r12 r13 r14 r15
    words[-10] = 0;
    words[-9] = 0;
    uint16_t fpu_cw = 0x037F;
    uint32_t mxcsr = 0x1F80;
    std::memcpy(&words[-10], &fpu_cw, sizeof fpu_cw);
    std::memcpy(reinterpret_cast<char*>(&words[-10]) + 8, &mxcsr, sizeof mxcsr);
    fiber.sp = &words[-10];
#else
    getcontext(&fiber.context);
    fiber.context.uc_stack.ss_sp = fiber.stack;
    fiber.context.uc_stack.ss_size = fiber.stack_bytes;
    fiber.context.uc_link = nullptr;
    makecontext(&fiber.context, entry, 0);
#endif
}

void fiber_adopt_current_thread(Fiber& fiber) {
#if defined(EMU_TSAN)
    fiber.tsan_fiber = __tsan_get_current_fiber();
#else
    (void)fiber;
#endif
}

void fiber_switch(Fiber& from, Fiber& to) {
#if defined(__x86_64__)
    // Read before telling TSan about the switch: after it, accesses count as `to`'s.
    void* const to_sp = to.sp;
#endif
#if defined(EMU_TSAN)
    __tsan_switch_to_fiber(to.tsan_fiber, __tsan_switch_to_fiber_no_sync);
#endif
#if defined(__x86_64__)
    emu_fiber_switch(&from.sp, to_sp);
#else
    swapcontext(&from.context, &to.context);
#endif
}

void race_release(const void* addr) {
#if defined(EMU_TSAN)
    __tsan_release(const_cast<void*>(addr));
#else
    (void)addr;
#endif
}

void race_acquire(const void* addr) {
#if defined(EMU_TSAN)
    __tsan_acquire(const_cast<void*>(addr));
#else
    (void)addr;
#endif
}

}  // namespace emu
