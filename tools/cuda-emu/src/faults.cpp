// faults.cpp — parsing and counting of the fault-injection plan (see faults.h).
#include "faults.h"

#include <array>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace emu {
namespace {

struct SiteRule {
    unsigned long long nth = 0;  // 0: never
    bool and_later = false;
    CUresult error = CUDA_SUCCESS;
    unsigned long long calls = 0;
};

struct Plan {
    std::array<SiteRule, static_cast<size_t>(FaultSite::Count)> sites;
    bool oom = false;
    CUresult oom_error = CUDA_ERROR_OUT_OF_MEMORY;
    unsigned long long oom_calls = 0;
};

std::mutex g_mutex;
Plan g_plan;

const char* const kSiteNames[] = {"alloc", "host_alloc", "copy", "launch", "kernel", "module"};

CUresult default_error(FaultSite site) {
    switch (site) {
    case FaultSite::Alloc:
    case FaultSite::HostAlloc: return CUDA_ERROR_OUT_OF_MEMORY;
    case FaultSite::Copy: return CUDA_ERROR_ILLEGAL_ADDRESS;
    case FaultSite::Launch: return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    case FaultSite::Kernel: return CUDA_ERROR_ILLEGAL_ADDRESS;
    case FaultSite::Module: return CUDA_ERROR_INVALID_PTX;
    case FaultSite::Count: break;
    }
    return CUDA_ERROR_UNKNOWN;
}

bool parse_number(const std::string& text, unsigned long long* out) {
    if (text.empty()) return false;
    char* end = nullptr;
    *out = std::strtoull(text.c_str(), &end, 10);
    return end != nullptr && *end == '\0';
}

bool parse_item(std::string item, Plan* plan, std::string* error) {
    CUresult code = CUDA_SUCCESS;
    const size_t eq = item.find('=');
    if (eq != std::string::npos) {
        unsigned long long value = 0;
        if (!parse_number(item.substr(eq + 1), &value) || value == 0) {
            *error = "bad error code in '" + item + "'";
            return false;
        }
        code = static_cast<CUresult>(value);
        item.resize(eq);
    }
    if (item == "oom") {
        plan->oom = true;
        if (code != CUDA_SUCCESS) plan->oom_error = code;
        return true;
    }
    const size_t colon = item.find(':');
    if (colon == std::string::npos) {
        *error = "expected SITE:N or oom, got '" + item + "'";
        return false;
    }
    const std::string site = item.substr(0, colon);
    std::string count = item.substr(colon + 1);
    bool and_later = false;
    if (!count.empty() && count.back() == '+') {
        and_later = true;
        count.pop_back();
    }
    unsigned long long nth = 0;
    if (!parse_number(count, &nth) || nth == 0) {
        *error = "expected a count >= 1 in '" + item + "'";
        return false;
    }
    for (size_t i = 0; i < static_cast<size_t>(FaultSite::Count); ++i) {
        if (site == kSiteNames[i]) {
            SiteRule& rule = plan->sites[i];
            rule.nth = nth;
            rule.and_later = and_later;
            rule.error = code != CUDA_SUCCESS ? code : default_error(static_cast<FaultSite>(i));
            return true;
        }
    }
    *error = "unknown fault site '" + site + "' (alloc, host_alloc, copy, launch, kernel, module)";
    return false;
}

}  // namespace

bool set_fault_plan(const std::string& spec, std::string* error) {
    Plan plan;
    size_t start = 0;
    while (start <= spec.size()) {
        size_t end = spec.find(',', start);
        if (end == std::string::npos) end = spec.size();
        std::string item = spec.substr(start, end - start);
        while (!item.empty() && item.front() == ' ') item.erase(item.begin());
        while (!item.empty() && item.back() == ' ') item.pop_back();
        if (!item.empty() && !parse_item(item, &plan, error)) {
            std::lock_guard<std::mutex> lock(g_mutex);
            g_plan = Plan{};
            return false;
        }
        start = end + 1;
    }
    std::lock_guard<std::mutex> lock(g_mutex);
    g_plan = plan;
    return true;
}

CUresult fault_for(FaultSite site) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (site == FaultSite::Alloc && g_plan.oom) {
        ++g_plan.oom_calls;
        return g_plan.oom_error;
    }
    SiteRule& rule = g_plan.sites[static_cast<size_t>(site)];
    ++rule.calls;
    if (rule.nth == 0) return CUDA_SUCCESS;
    if (rule.calls == rule.nth || (rule.and_later && rule.calls > rule.nth)) return rule.error;
    return CUDA_SUCCESS;
}

unsigned long long fault_site_calls(const std::string& site) {
    std::lock_guard<std::mutex> lock(g_mutex);
    for (size_t i = 0; i < static_cast<size_t>(FaultSite::Count); ++i) {
        if (site == kSiteNames[i]) return g_plan.sites[i].calls;
    }
    return 0;
}

bool fault_oom_active() {
    std::lock_guard<std::mutex> lock(g_mutex);
    return g_plan.oom;
}

}  // namespace emu
