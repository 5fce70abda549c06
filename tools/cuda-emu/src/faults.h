// faults.h — fault injection: which driver operation fails next, and with what error.
//
// Spec (OXIDE_CUDA_EMU_FAULT at cuInit, or oxide_emu_set_fault at run time): items
// separated by ',' — `SITE:N` fails the Nth call at SITE counted from when the spec was
// set, `SITE:N+` the Nth and every later one, `oom` every device allocation. `=CODE`
// after an item overrides the CUresult it injects (e.g. `module:1=222`).
//
//   site        calls counted                          default error (when it shows)
//   alloc       cuMemAlloc_v2, cuMemAllocAsync         OUT_OF_MEMORY (returned)
//   host_alloc  cuMemHostAlloc, cuMemAllocHost_v2      OUT_OF_MEMORY (returned)
//   copy        every cuMemcpy* call                   ILLEGAL_ADDRESS (returned, not sticky)
//   launch      cuLaunchKernel                         LAUNCH_OUT_OF_RESOURCES (returned)
//   kernel      cuLaunchKernel, fails while executing  ILLEGAL_ADDRESS (sticky, at next sync)
//   module      cuModuleLoadData(Ex)                   INVALID_PTX (returned)
#pragma once

#include <string>

#include "cuda_types.h"

namespace emu {

enum class FaultSite { Alloc, HostAlloc, Copy, Launch, Kernel, Module, Count };

// Replaces the plan and resets every counter. Returns false (and keeps no plan) when the
// spec does not parse; `error` then says why.
bool set_fault_plan(const std::string& spec, std::string* error);

// Counts one call at `site`; returns the error to inject, or CUDA_SUCCESS.
CUresult fault_for(FaultSite site);

// Calls counted at the site named `site` (alloc, host_alloc, copy, launch, kernel,
// module) since the plan was last set; 0 for an unknown name.
unsigned long long fault_site_calls(const std::string& site);

// Whether `oom` is active (cuMemGetInfo then reports no free memory).
bool fault_oom_active();

}  // namespace emu
