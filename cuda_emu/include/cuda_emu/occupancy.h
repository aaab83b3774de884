#pragma once
// Device profiles of real GPUs and the CUDA occupancy calculator's rules (docs/emulator_counters.md,
// "Occupancy and device profiles"). The emulated GPU reports the selected profile through
// cudaGetDeviceProperties; MINITRAIN_EMU_DEVICE=h100|h200|a100|l4|rtx4090|t4 selects it (default
// h100).

#include <cstddef>
#include <string>
#include <vector>

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
  int sub_partitions;  // registers are split evenly among them
  std::size_t smem_per_sm;           // shared memory per SM (the largest carveout)
  std::size_t smem_per_block;        // without opt-in
  std::size_t smem_per_block_optin;  // with cudaFuncAttributeMaxDynamicSharedMemorySize
  int smem_alloc_unit;               // bytes
  std::size_t reserved_smem_per_block;  // the driver's, counted against each block
  double fp32_flops;     // peak FP32 FLOP/s (non-tensor, boost clock)
  double dram_bytes_per_s;
  std::size_t l2_bytes;
  std::size_t dram_bytes;
  int sm_clock_khz;  // boost
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
  int limit_warps = 0;      // launch__occupancy_limit_warps
  int limit_blocks = 0;     // launch__occupancy_limit_blocks
  int limit_registers = 0;  // launch__occupancy_limit_registers (-1: registers unknown)
  int limit_shared_mem = 0; // launch__occupancy_limit_shared_mem
  int blocks_per_sm = 0;    // the least of the limits (cudaOccupancyMaxActiveBlocksPerMultiprocessor)
  int warps_per_sm = 0;     // blocks_per_sm x warps per block
  double occupancy_pct = 0; // sm__maximum_warps_per_active_cycle_pct
  std::size_t smem_allocated_per_block = 0;  // static + dynamic + reserved, rounded up
  const char* limiter = "";  // "registers", "shared_mem", "warps" or "blocks" (first of the least)
  bool registers_known = false;
};

/// `regs_per_thread` < 0: unknown (the register limit is left out, limit_registers = -1, and the
/// figures are an upper bound). `smem_per_block`: static + dynamic shared memory of one block.
Occupancy theoretical_occupancy(const DeviceProfile& p, int threads_per_block, int regs_per_thread,
                                std::size_t smem_per_block);

}  // namespace mtemu
