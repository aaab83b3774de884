#pragma once
// A launched grid, and the pool of host threads that runs its blocks. A stream's thread hands a
// grid to the pool and waits; workers take blocks in a scrambled order (blocks run in any order on
// a GPU, and code that depends on one is wrong), several at once, each block whole on one worker.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "cuda_runtime_api.h"
#include "cuda_emu/launch.h"
#include "cuda_emu/occupancy.h"

namespace mtemu::detail {

struct Provenance;
struct RaceCopies;

struct Grid {
  LaunchSite site;
  const void* kernel = nullptr;  // the kernel's address: its attributes' key
  LaunchConfig config;
  std::function<void()> body;              // runs one thread: the kernel with its arguments
  std::shared_ptr<Provenance> provenance;  // what its pointers reach (initcheck.cpp)
  int device = 0;
  uint64_t blocks = 0;      // gridDim.x * gridDim.y * gridDim.z
  uint64_t order_step = 1;  // block i runs as block (i * order_step + order_offset) % blocks
  uint64_t order_offset = 0;
  uint64_t race_serial = 0;                       // racecheck's number for this grid (race.cpp)
  std::shared_ptr<const RaceCopies> race_copies;  // copies it is not ordered after (race.h)

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

/// Shared memory per block on the selected device profile (MINITRAIN_EMU_DEVICE, default H100):
/// in all (static + dynamic) without opt-in (48 KiB on every profile), and with
/// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, n) up to n dynamic
/// and the profile's opt-in maximum in all (227 KiB on H100 and H200, 163 on A100, 99 on L4 and
/// RTX 4090, 64 on T4).
inline std::size_t shared_per_block_default() { return current_device_profile().smem_per_block; }
inline std::size_t shared_per_block_optin() {
  return current_device_profile().smem_per_block_optin;
}

/// The kernel's MaxDynamicSharedMemorySize opt-in, or 0 where it has none.
std::size_t dynamic_shared_optin(const void* kernel);
/// Records that a block of `kernel` uses `bytes` of static shared memory (a GPU knows this from
/// the compiled kernel; the emulator learns it when a block declares its __shared__ variables),
/// so that later launches and cudaFuncSetAttribute check static + dynamic as the GPU does.
void note_static_shared(const void* kernel, std::size_t bytes);

/// "kernel 'name' (file:line)": how reports name a launch.
std::string describe(const LaunchSite& site);

}  // namespace mtemu::detail
