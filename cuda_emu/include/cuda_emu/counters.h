#pragma once
// Exact per-launch memory counters of the emulated GPU (docs/emulator_counters.md): what a warp's
// memory instructions ask of the memory system, with Nsight Compute's definitions. Collected when
// MINITRAIN_EMU_COUNTERS=PATH is set (one JSON line per launch appended to PATH) or when a
// program turns them on with counters_collect(true).

#include <cstdint>
#include <string>
#include <vector>

namespace mtemu {

struct LaunchCounters {
  std::string kernel, file;
  int line = 0;
  unsigned grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  uint64_t dynamic_smem = 0;
  uint64_t global_load_requests = 0, global_load_sectors = 0;
  uint64_t global_store_requests = 0, global_store_sectors = 0;
  uint64_t global_atomic_requests = 0;
  uint64_t global_atomic_sectors = 0;  // per atomic request, the distinct sectors it touches
  // What one block's loads would ask of L2 if its L1 kept every sector it had read (the L2 level
  // of the roofline model, docs/emulator_counters.md): the distinct global sectors each block's
  // loads touch, summed over the blocks, and the most distinct load bytes any one block touched
  // (its footprint, which the model checks against the L1 the resident blocks share).
  uint64_t block_distinct_load_sectors = 0;
  uint64_t max_block_load_bytes = 0;
  uint64_t shared_load_requests = 0, shared_load_wavefronts = 0;
  uint64_t shared_store_requests = 0, shared_store_wavefronts = 0;
  uint64_t shared_bank_conflicts = 0;
  uint64_t lanes = 0;  // active lanes summed over every memory request
  double active_lanes_mean = 0;
  uint64_t barriers = 0;  // __syncthreads() executed, counted per warp
  uint64_t warps_launched = 0;
  uint64_t bytes_moved = 0;             // (load + store sectors) * 32
  uint64_t distinct_bytes_touched = 0;  // distinct global sectors * 32
  // Theoretical occupancy of the launch on the selected device profile (MINITRAIN_EMU_DEVICE),
  // with the registers and static shared memory of the real compiler's build of the kernel
  // (cuda_emu/kernel_registers.tsv); registers -1: unknown (a kernel not in the table), and the
  // occupancy is then an upper bound that leaves the register limit out.
  std::string device_profile;
  int registers = -1;      // the most any instantiation of the kernel's template uses
  int registers_min = -1;  // the least (equal to registers where there is one count)
  uint64_t static_smem = 0;
  int blocks_per_sm = 0;
  double occupancy_pct = 0;
  std::string occupancy_limiter;
  std::string json() const;
  /// Global loads, stores and atomics and shared loads and stores: the warp-level memory
  /// instructions the launch executed.
  uint64_t memory_requests() const {
    return global_load_requests + global_store_requests + global_atomic_requests +
           shared_load_requests + shared_store_requests;
  }
};

/// Of the launches one op made (a GEMM variant that launches more than one kernel), the one that
/// dominates: the most memory requests (the emulator's measure of the work a launch did; it has
/// no clock), the earliest of equals. Its index, or -1 for none. `minitrain bench gemm
/// --counters` gives that launch's occupancy and names it.
int dominant_launch(const std::vector<LaunchCounters>& launches);

/// Turns in-memory collection on or off (launches that start afterwards); counters_take() returns
/// the launches recorded since its last call, in completion order.
void counters_collect(bool on);
std::vector<LaunchCounters> counters_take();

namespace detail {
extern bool counters_on;  // collection on (the memory hooks' one branch)
// The site is the caller's return address: the atomic, inlined into the kernel.
void count_atomic_begin(const void* addr, std::size_t bytes);
void count_atomic_end();
/// Counts one atomic and keeps the accesses it makes out of the load/store counts.
struct AtomicCount {
  __attribute__((always_inline)) AtomicCount(const void* a, std::size_t n) {
    if (__builtin_expect(counters_on, 0)) {
      active = true;
      count_atomic_begin(a, n);
    }
  }
  ~AtomicCount() {
    if (active) count_atomic_end();
  }
  bool active = false;
};
}  // namespace detail
}  // namespace mtemu
