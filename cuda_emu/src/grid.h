#pragma once
// A launched grid, and the pool of host threads that runs its blocks. A stream's thread hands a
// grid to the pool and waits; workers take blocks in a scrambled order (blocks run in any order on
// a GPU, and code that depends on one is wrong), several at once, each block whole on one worker.

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "cuda_runtime_api.h"
#include "cuda_emu/launch.h"

namespace mtemu::detail {

struct Grid {
  LaunchSite site;
  LaunchConfig config;
  std::function<void()> body;  // runs one thread: the kernel with its arguments
  int device = 0;
  uint64_t blocks = 0;      // gridDim.x * gridDim.y * gridDim.z
  uint64_t order_step = 1;  // block i runs as block (i * order_step + order_offset) % blocks
  uint64_t order_offset = 0;

  // Claimed and finished blocks; guarded by the pool's mutex.
  uint64_t claimed = 0, finished = 0;
  // The first fault of any block ends the grid; later blocks are skipped.
  std::atomic<bool> faulted{false};
  cudaError_t fault_code = cudaSuccess;
  std::string fault_text;

  // ThreadSanitizer sync tokens: the launch happens before every thread of the grid, and every
  // thread before what the stream does next (see sanitizer.h).
  char start_token = 0;
  char done_token = 0;

  uint3 block_index(uint64_t i) const;
};

/// Runs every block of `g` on the worker pool; returns when all have finished or one faulted.
void run_grid(Grid& g);

/// "kernel 'name' (file:line)": how reports name a launch.
std::string describe(const LaunchSite& site);

}  // namespace mtemu::detail
