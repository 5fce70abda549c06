// emu_api.cpp — see emu_api.h.
#include "emu_api.h"

#include <cstdio>
#include <string>

#include "faults.h"
#include "kernel_registry.h"
#include "trace.h"

using namespace emu;

namespace {
std::string report_line() {
    std::string line = "emulated launches:";
    for (const KernelEntry* k : all_kernels()) {
        line += " " + k->name + "=" + std::to_string(k->launches.load(std::memory_order_relaxed));
    }
    return line;
}
}  // namespace

EMU_EXPORT int oxide_emu_set_fault(const char* spec) {
    std::string error;
    const bool ok = set_fault_plan(spec == nullptr ? "" : spec, &error);
    clear_sticky_error();
    if (!ok) std::fprintf(stderr, "cuda-emu: fault spec rejected: %s\n", error.c_str());
    return ok ? 0 : -1;
}

EMU_EXPORT unsigned long long oxide_emu_fault_calls(const char* site) {
    return site == nullptr ? 0 : fault_site_calls(site);
}

EMU_EXPORT unsigned long long oxide_emu_launch_count(const char* kernel) {
    const KernelEntry* k = kernel == nullptr ? nullptr : find_kernel(kernel);
    return k == nullptr ? 0 : k->launches.load(std::memory_order_relaxed);
}

EMU_EXPORT void oxide_emu_report(void) { std::fprintf(stderr, "%s\n", report_line().c_str()); }

EMU_EXPORT size_t oxide_emu_report_line(char* buf, size_t len) {
    const std::string line = report_line();
    if (buf != nullptr && len > 0) std::snprintf(buf, len, "%s", line.c_str());
    return line.size();
}

EMU_EXPORT unsigned long long oxide_emu_call_count(const char* name) {
    return name == nullptr ? 0 : call_count(name);
}

EMU_EXPORT void oxide_emu_trace(int on) { trace_enable(on != 0); }

EMU_EXPORT size_t oxide_emu_trace_text(char* buf, size_t len) {
    const std::string text = trace_text();
    if (buf != nullptr && len > 0) std::snprintf(buf, len, "%s", text.c_str());
    return text.size();
}
