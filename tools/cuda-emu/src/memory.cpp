// memory.cpp — see memory.h.
#include "memory.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "driver_state.h"
#include "trace.h"

namespace emu {
namespace {

constexpr size_t kAlignBytes = 256;
constexpr size_t kGuardBytes = 1024;  // before and after every device allocation
constexpr unsigned char kGuardByte = 0x5A;
constexpr unsigned char kPoisonByte = 0xA5;
constexpr unsigned char kFreedByte = 0xDB;
constexpr size_t kPageBytes = 4096;

struct Allocation {
    MemoryKind kind;
    size_t bytes;
    void* block;  // what to free()
    unsigned long long id;
};

struct MemoryMap {
    std::mutex mutex;
    std::map<uint64_t, Allocation> ranges;  // by base address
    size_t device_bytes = 0;
    unsigned long long next_id = 1;
};

MemoryMap& map() {
    static MemoryMap* m = new MemoryMap();
    return *m;
}

size_t round_up(size_t value, size_t to) { return (value + to - 1) / to * to; }

bool guard_intact(const unsigned char* bytes) {
    for (size_t i = 0; i < kGuardBytes; ++i) {
        if (bytes[i] != kGuardByte) return false;
    }
    return true;
}

// Caller holds the mutex.
const std::pair<const uint64_t, Allocation>* containing(MemoryMap& m, uint64_t ptr) {
    auto it = m.ranges.upper_bound(ptr);
    if (it == m.ranges.begin()) return nullptr;
    --it;
    if (ptr >= it->first + (it->second.bytes == 0 ? 1 : it->second.bytes)) return nullptr;
    return &*it;
}

std::string guard_report(uint64_t base, const Allocation& a) {
    const auto* p = reinterpret_cast<const unsigned char*>(base);
    const bool before = guard_intact(p - kGuardBytes);
    const bool after = guard_intact(p + a.bytes);
    if (before && after) return "";
    char text[200];
    std::snprintf(text, sizeof text, "device buffer #%llu at 0x%llx (%zu bytes) was written %s its bounds",
                  a.id, static_cast<unsigned long long>(base), a.bytes,
                  !after ? "past the end of" : "before the start of");
    return text;
}

}  // namespace

size_t device_total_bytes() {
    static const size_t total = static_cast<size_t>(
        env_integer("OXIDE_CUDA_EMU_TOTAL_MEM_BYTES", 143771LL * 1024 * 1024));
    return total;
}

size_t device_used_bytes() {
    std::lock_guard<std::mutex> lock(map().mutex);
    return map().device_bytes;
}

CUresult device_alloc(size_t bytes, CUdeviceptr* out) {
    count_call("cuMemAlloc");
    MemoryMap& m = map();
    {
        std::lock_guard<std::mutex> lock(m.mutex);
        if (bytes > device_total_bytes() - m.device_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    const size_t total = kGuardBytes + round_up(bytes, kAlignBytes) + kGuardBytes;
    auto* block = static_cast<unsigned char*>(std::aligned_alloc(kAlignBytes, total));
    if (block == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    std::memset(block, kGuardByte, total);
    unsigned char* user = block + kGuardBytes;
    std::memset(user, kPoisonByte, bytes);
    std::lock_guard<std::mutex> lock(m.mutex);
    m.ranges[reinterpret_cast<uint64_t>(user)] = Allocation{MemoryKind::Device, bytes, block, m.next_id++};
    m.device_bytes += bytes;
    *out = reinterpret_cast<CUdeviceptr>(user);
    return CUDA_SUCCESS;
}

CUresult device_free(CUdeviceptr ptr) {
    MemoryMap& m = map();
    std::unique_lock<std::mutex> lock(m.mutex);
    auto it = m.ranges.find(ptr);
    if (it == m.ranges.end() || it->second.kind != MemoryKind::Device) return CUDA_ERROR_INVALID_VALUE;
    const Allocation a = it->second;
    const std::string damage = guard_report(ptr, a);
    m.ranges.erase(it);
    m.device_bytes -= a.bytes;
    lock.unlock();
    std::memset(reinterpret_cast<void*>(ptr), kFreedByte, a.bytes);
    std::free(a.block);
    if (!damage.empty()) {
        set_sticky_error(CUDA_ERROR_ILLEGAL_ADDRESS, damage + " (found at free)");
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    }
    return CUDA_SUCCESS;
}

bool device_range_valid(uint64_t ptr, size_t bytes) {
    MemoryMap& m = map();
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto* r = containing(m, ptr);
    return r != nullptr && r->second.kind == MemoryKind::Device && ptr + bytes <= r->first + r->second.bytes;
}

CUresult pinned_alloc(size_t bytes, void** out) {
    count_call("cuMemHostAlloc");
    void* block = std::aligned_alloc(kPageBytes, round_up(bytes == 0 ? 1 : bytes, kPageBytes));
    if (block == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
    MemoryMap& m = map();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.ranges[reinterpret_cast<uint64_t>(block)] = Allocation{MemoryKind::PinnedHost, bytes, block, m.next_id++};
    *out = block;
    return CUDA_SUCCESS;
}

CUresult pinned_free(void* ptr) {
    MemoryMap& m = map();
    std::unique_lock<std::mutex> lock(m.mutex);
    auto it = m.ranges.find(reinterpret_cast<uint64_t>(ptr));
    if (it == m.ranges.end() || it->second.kind != MemoryKind::PinnedHost) return CUDA_ERROR_INVALID_VALUE;
    void* block = it->second.block;
    m.ranges.erase(it);
    lock.unlock();
    std::free(block);
    return CUDA_SUCCESS;
}

bool pinned_range_valid(const void* ptr, size_t bytes) {
    MemoryMap& m = map();
    std::lock_guard<std::mutex> lock(m.mutex);
    const uint64_t p = reinterpret_cast<uint64_t>(ptr);
    const auto* r = containing(m, p);
    return r != nullptr && r->second.kind == MemoryKind::PinnedHost && p + bytes <= r->first + r->second.bytes;
}

MemoryRange find_range(uint64_t ptr) {
    MemoryMap& m = map();
    std::lock_guard<std::mutex> lock(m.mutex);
    const auto* r = containing(m, ptr);
    if (r == nullptr) return MemoryRange{};
    return MemoryRange{r->second.kind, r->first, r->second.bytes, r->second.id};
}

std::string check_device_guards() {
    MemoryMap& m = map();
    std::lock_guard<std::mutex> lock(m.mutex);
    for (const auto& [base, a] : m.ranges) {
        if (a.kind != MemoryKind::Device) continue;
        std::string damage = guard_report(base, a);
        if (!damage.empty()) return damage;
    }
    return "";
}

}  // namespace emu
