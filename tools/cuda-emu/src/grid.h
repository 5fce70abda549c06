// grid.h — runs every block of a launch: on the calling thread (the stream's worker) and
// on a fixed pool of "SM" threads that take blocks from the same counter, so blocks of one
// grid run concurrently, in no fixed order, as on a GPU.
//
// Pool size: OXIDE_CUDA_EMU_SM_THREADS, default hardware threads - 1 (at least 1, at most
// 7); the pool is shared by all streams and started on the first multi-block launch.
#pragma once

#include <functional>
#include <string>

#include "block_runner.h"

namespace emu {

// Runs the grid to completion; returns "" or the first block's error.
std::string run_grid(const LaunchShape& shape, const std::function<void()>& body);

}  // namespace emu
