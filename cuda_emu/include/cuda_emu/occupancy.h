#pragma once
// Device profiles of real GPUs and the CUDA occupancy calculator's rules
// (docs/emulator_counters.md, "Occupancy and device profiles"). The emulated GPU reports the
// selected profile through cudaGetDeviceProperties;
// MINITRAIN_EMU_DEVICE=h100|h200|a100|l4|rtx4090|t4 selects it (default h100).

#include <cstddef>
#include <string>
#include <vector>

#include "cuda_emu/counters.h"

namespace mtemu {

struct DeviceProfile {
  const char* key;   // MINITRAIN_EMU_DEVICE's value
  const char* name;  // cudaDeviceProp::name
  int major, minor;  // compute capability
  int sms;
  int max_threads_per_sm, max_warps_per_sm, max_blocks_per_sm;
  int max_threads_per_block;
  int regs_per_sm, regs_per_block;
  int reg_alloc_unit;  // registers, allocated per warp (granularity: warp)
  int max_regs_per_thread;
  int sub_partitions;                   // registers are split evenly among them
  std::size_t smem_per_sm;              // shared memory per SM (the largest carveout)
  std::size_t smem_per_block;           // without opt-in
  std::size_t smem_per_block_optin;     // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int smem_alloc_unit;                  // bytes
  std::size_t reserved_smem_per_block;  // the driver's, counted against each block
  double fp32_flops;                    // peak FP32 FLOP/s (non-tensor, boost clock)
  double dram_bytes_per_s;
  std::size_t l2_bytes;
  std::size_t dram_bytes;
  int sm_clock_khz;  // boost
  // The L1 data cache and shared memory share one array per SM (what is not carved out as shared
  // memory caches global loads), and the L2's bandwidth in bytes per clock at the boost clock:
  // docs/emulator_counters.md, "The roofline's L2 level", gives each figure's source, and says
  // where NVIDIA publishes none and what the profile assumes instead (l2_published false).
  std::size_t l1_smem_per_sm;
  double l2_bytes_per_clk;
  bool l2_published;

  /// L2 bandwidth (bytes/s): l2_bytes_per_clk at the boost clock.
  double l2_bytes_per_s() const { return l2_bytes_per_clk * sm_clock_khz * 1e3; }
  /// L1/shared bandwidth (bytes/s): one 128-byte wavefront (32 banks x 4 bytes) per SM per clock.
  double l1_bytes_per_s() const { return 128.0 * sms * sm_clock_khz * 1e3; }
};

/// Every profile, H100 first.
const std::vector<DeviceProfile>& device_profiles();
/// The profile whose key is `key`; throws std::invalid_argument naming it and the known keys.
const DeviceProfile& device_profile(const std::string& key);
/// The profile MINITRAIN_EMU_DEVICE selects (read once), or H100 SXM where it is unset.
const DeviceProfile& current_device_profile();

/// Theoretical occupancy of one launch, with Nsight Compute's launch__occupancy_limit_* figures
/// (blocks per SM each resource allows) and the rules of the toolkit's cuda_occupancy.h.
struct Occupancy {
  int limit_warps = 0;       // launch__occupancy_limit_warps
  int limit_blocks = 0;      // launch__occupancy_limit_blocks
  int limit_registers = 0;   // launch__occupancy_limit_registers (-1: registers unknown)
  int limit_shared_mem = 0;  // launch__occupancy_limit_shared_mem
  int blocks_per_sm = 0;  // the least of the limits (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  int warps_per_sm = 0;   // blocks_per_sm x warps per block
  double occupancy_pct = 0;                  // sm__maximum_warps_per_active_cycle_pct
  std::size_t smem_allocated_per_block = 0;  // static + dynamic + reserved, rounded up
  const char* limiter = "";  // "registers", "shared_mem", "warps" or "blocks" (first of the least)
  bool registers_known = false;
};

/// `regs_per_thread` < 0: unknown (the register limit is left out, limit_registers = -1, and the
/// figures are an upper bound). `smem_per_block`: static + dynamic shared memory of one block.
Occupancy theoretical_occupancy(const DeviceProfile& p, int threads_per_block, int regs_per_thread,
                                std::size_t smem_per_block);

/// A modelled time for one launch on a profile (a roofline, not a measurement): compute at the
/// FP32 peak, DRAM traffic at the datasheet bandwidth, whichever is longer, plus a fixed launch
/// overhead. `bytes`: DRAM traffic (the counters' distinct_bytes_touched is its lower bound).
struct RooflineModel {
  double flops = 0, bytes = 0;
  double intensity = 0;  // FLOP per DRAM byte (0 where bytes is 0)
  double ridge = 0;      // the profile's FLOP per byte where the roofs meet
  double compute_s = 0, memory_s = 0, overhead_s = 0;
  double time_s = 0;       // max(compute_s, memory_s) + overhead_s
  double gflops = 0;       // flops / time_s / 1e9
  double pct_of_roof = 0;  // attained FLOP/s over min(peak, intensity x bandwidth); with no FLOPs,
                           // bytes / time_s over the bandwidth
  const char* bound = "";  // "compute", "memory" or "overhead" (the launch overhead dominates)
};

/// Launch overhead the model adds to every launch: 3 us, the order of a kernel launch's latency
/// on current GPUs (an assumption, stated wherever the model prints).
constexpr double kModelLaunchOverheadS = 3e-6;

RooflineModel roofline_model(const DeviceProfile& p, double flops, double bytes,
                             double overhead_s = kModelLaunchOverheadS);

/// The bytes one launch asks of L2, MODELLED from its exact counters (docs/emulator_counters.md,
/// "The roofline's L2 level"). L1 is write-through, so every store and atomic sector goes to L2.
/// A load sector goes to L2 the first time its block reads it, when the L1 holds the block's reuse:
/// the largest block footprint (max_block_load_bytes) times the blocks one SM holds at once fits
/// the L1 left beside their shared memory; otherwise every load sector goes (no reuse). Reuse
/// between blocks that share an SM is not modelled (an upper bound there).
struct L2Traffic {
  double load_bytes = 0, store_bytes = 0, atomic_bytes = 0;
  double bytes = 0;            // the three together
  int resident_blocks = 0;     // min(blocks_per_sm, ceil(blocks / SMs))
  double footprint_bytes = 0;  // resident_blocks x max_block_load_bytes
  double l1_cache_bytes = 0;   // l1_smem_per_sm less the resident blocks' shared memory
  bool reuse_fits_l1 = false;
};

/// `o`: the launch's occupancy on `p` (theoretical_occupancy with its threads, registers and
/// shared memory).
L2Traffic l2_traffic(const DeviceProfile& p, const LaunchCounters& c, const Occupancy& o);

/// The hierarchical roofline, MODELLED: compute at the FP32 peak and each memory level's bytes at
/// its bandwidth (DRAM: the datasheet's; L2: l2_bytes_per_s; L1: l1_bytes_per_s); the launch takes
/// the longest of them plus the launch overhead. `bound` names the longest ("compute", "dram",
/// "l2", "l1"; the first of equals in that order) or "overhead" where the overhead exceeds it.
struct RooflineLevels {
  double flops = 0, dram_bytes = 0, l2_bytes = 0, l1_bytes = 0;
  double compute_s = 0, dram_s = 0, l2_s = 0, l1_s = 0, overhead_s = 0;
  double time_s = 0;  // max(compute_s, dram_s, l2_s, l1_s) + overhead_s
  double gflops = 0;  // flops / time_s / 1e9
  const char* bound = "";
};

RooflineLevels roofline_levels(const DeviceProfile& p, double flops, double dram_bytes,
                               double l2_bytes, double l1_bytes,
                               double overhead_s = kModelLaunchOverheadS);

}  // namespace mtemu
