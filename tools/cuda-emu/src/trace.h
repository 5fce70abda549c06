// trace.h — what tests may observe of the driver beyond results: how often the host
// called the allocating entry points, and (while enabled) the order in which each
// stream ran its copies, launches and events.
//
// Both exist so that a test can prove a property of the host code's schedule (buffers
// reused across batches, work spread over two streams in the designed order) rather
// than infer it from timings, which the emulator does not model.
#pragma once

#include <string>

namespace emu {

// Counts one call of `name` ("cuMemAlloc", "cuMemHostAlloc", "cuStreamCreate").
void count_call(const char* name);
// Calls of `name` since the process started (0 for a name never counted).
unsigned long long call_count(const char* name);

// Starts (clearing what was recorded) or stops recording the stream trace.
void trace_enable(bool on);
bool tracing();
// Appends "<stream> <label>" as the stream's worker finished that operation.
void trace_record(const std::string& stream, const std::string& label);
// The recorded lines, in completion order, each ending in '\n'.
std::string trace_text();

}  // namespace emu
