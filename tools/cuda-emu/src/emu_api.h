// emu_api.h — the emulator's own exported functions, for tests (Rust or C++) that run in
// the same process as the driver.
#pragma once

#include "driver_state.h"

// Replaces the fault plan (grammar in faults.h), resets its counters and clears any
// sticky error. Returns 0, or -1 when the spec does not parse (the plan is then empty).
EMU_EXPORT int oxide_emu_set_fault(const char* spec);
// Calls counted at fault site `site` ("alloc", "host_alloc", "copy", "launch", "kernel",
// "module") since the fault plan was last set (an empty plan counts too); 0 for an
// unknown site. A fault campaign runs a query once to learn how many calls each site
// sees, then fails each of them in a run of its own.
EMU_EXPORT unsigned long long oxide_emu_fault_calls(const char* site);
// Launches of `kernel` that ran to completion since the process started (0 if unknown).
EMU_EXPORT unsigned long long oxide_emu_launch_count(const char* kernel);
// Writes `emulated launches: <kernel>=<count> ...` (every kernel, by name) to stderr.
EMU_EXPORT void oxide_emu_report(void);
// The same line into `buf` (NUL-terminated, truncated to `len`); returns its full length.
EMU_EXPORT size_t oxide_emu_report_line(char* buf, size_t len);
// Calls of a driver entry point that allocates: "cuMemAlloc" (device memory, also the
// async and pitched forms), "cuMemHostAlloc" (pinned host memory) or "cuStreamCreate".
EMU_EXPORT unsigned long long oxide_emu_call_count(const char* name);
// Starts (non-zero; clears the previous trace) or stops (0) the stream trace: each
// stream's worker then records "<stream> <op>" as it finishes an operation, where <op>
// is h2d, d2h, "launch <kernel>", record (an event) or wait (on an event).
EMU_EXPORT void oxide_emu_trace(int on);
// The trace recorded so far into `buf` (NUL-terminated, truncated to `len`), one line per
// operation in completion order; returns its full length.
EMU_EXPORT size_t oxide_emu_trace_text(char* buf, size_t len);
