// Device profiles and the occupancy calculator (cuda_emu/occupancy.h).
//
// Sources of the figures (checked 2026-11):
// - Per-SM limits (threads, warps, blocks, registers, shared memory per SM / per block / opt-in,
//   max registers per thread): CUDA C++ Programming Guide, "Compute Capabilities", table
//   "Technical Specifications per Compute Capability" (cc 7.5, 8.0, 8.9, 9.0); the reserved shared
//   memory per block (1 KiB from cc 8.0, 0 on 7.5) is cudaDeviceProp::reservedSharedMemPerBlock
//   as the same guide gives it.
// - Allocation rules (register unit 256 per warp, 4 sub-partitions; shared memory unit 256 bytes
//   on cc 7.x, 128 from 8.0): the toolkit's own calculator, include/cuda_occupancy.h of CUDA 13.0
//   (cudaOccRegAllocationGranularity, cudaOccSubPartitionsPerMultiprocessor,
//   cudaOccSMemAllocationGranularity, cudaOccMaxBlocksPerSMRegsLimit, ...), which this file
//   follows.
// - SM count, boost clock, peak FP32 (non-tensor), DRAM size and bandwidth, L2: the vendor's
//   datasheets and whitepapers: NVIDIA H100 Tensor Core GPU datasheet (SXM5: 132 SMs, 67 TFLOPS
//   FP32, 3.35 TB/s) and Hopper architecture whitepaper (50 MB L2); H200 datasheet (141 GB,
//   4.8 TB/s); A100 datasheet (SXM4 80 GB: 19.5 TFLOPS, 2,039 GB/s) and Ampere whitepaper (108 SMs,
//   40 MB L2); L4 datasheet (30.3 TFLOPS, 300 GB/s, 24 GB) and Ada whitepaper (L4: 58 SMs, 48 MB
//   L2; RTX 4090: 128 SMs, 82.6 TFLOPS, 1,008 GB/s, 72 MB L2); T4 datasheet (8.1 TFLOPS, 320 GB/s,
//   16 GB) and Turing whitepaper (40 SMs, 4 MB L2).
// - Combined L1 data cache + shared memory per SM: the CUDA tuning guides (Hopper: 256 KB; Ampere
//   A100: 192 KB; Ada: 128 KB; Turing: 96 KB).
// - L2 bandwidth: NVIDIA publishes one figure, the A100 whitepaper's L2 cache read bandwidth of
//   5120 bytes/clk (against V100's 2048: "2.3x the L2 cache read bandwidth of V100" at the two
//   boost clocks). For H100 and H200 it publishes none; the profiles take A100's 5120 bytes/clk,
//   as third-party tables do (Ultrasonics Sonochemistry 99 (2023) 106546, Table 3: H100 L2
//   8986 GB/s = 5120 x 1755 MHz). For L4, RTX 4090 and T4 it publishes none either; the profiles
//   take V100's 2048 bytes/clk, a guess of the right order for these smaller chips. Both are
//   assumptions of the model (l2_published false), to be replaced by measured figures.
// These are the figures a model needs, not measurements: sustained bandwidth and FLOP/s are lower.

#include "cuda_emu/occupancy.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace mtemu {
namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024, GiB = std::size_t(1) << 30;

std::vector<DeviceProfile> make_profiles() {
  // key, name, cc, SMs, threads/warps/blocks per SM, threads per block, regs per SM / block,
  // reg unit, max regs per thread, sub-partitions, smem per SM / block / opt-in, smem unit,
  // reserved smem, FP32 FLOP/s, DRAM B/s, L2, DRAM, boost clock kHz, L1 + shared per SM,
  // L2 bytes per clock, whether NVIDIA publishes that L2 figure
  return {
      {"h100",    "NVIDIA H100 80GB HBM3 (SXM5, profile)",
       9,         0,
       132,       2048,
       64,        32,
       1024,      65536,
       65536,     256,
       255,       4,
       228 * KiB, 48 * KiB,
       227 * KiB, 128,
       1 * KiB,   66.9e12,
       3.35e12,   50 * MiB,
       80 * GiB,  1980000,
       256 * KiB, 5120,
       false},
      {"h200",
       "NVIDIA H200 (SXM, profile)",
       9,
       0,
       132,
       2048,
       64,
       32,
       1024,
       65536,
       65536,
       256,
       255,
       4,
       228 * KiB,
       48 * KiB,
       227 * KiB,
       128,
       1 * KiB,
       66.9e12,
       4.8e12,
       50 * MiB,
       std::size_t(141e9),
       1980000,
       256 * KiB,
       5120,
       false},
      {"a100",    "NVIDIA A100-SXM4-80GB (profile)",
       8,         0,
       108,       2048,
       64,        32,
       1024,      65536,
       65536,     256,
       255,       4,
       164 * KiB, 48 * KiB,
       163 * KiB, 128,
       1 * KiB,   19.5e12,
       2.039e12,  40 * MiB,
       80 * GiB,  1410000,
       192 * KiB, 5120,
       true},
      {"l4",      "NVIDIA L4 (profile)",
       8,         9,
       58,        1536,
       48,        24,
       1024,      65536,
       65536,     256,
       255,       4,
       100 * KiB, 48 * KiB,
       99 * KiB,  128,
       1 * KiB,   30.3e12,
       300e9,     48 * MiB,
       24 * GiB,  2040000,
       128 * KiB, 2048,
       false},
      {"rtx4090", "NVIDIA GeForce RTX 4090 (profile)",
       8,         9,
       128,       1536,
       48,        24,
       1024,      65536,
       65536,     256,
       255,       4,
       100 * KiB, 48 * KiB,
       99 * KiB,  128,
       1 * KiB,   82.6e12,
       1008e9,    72 * MiB,
       24 * GiB,  2520000,
       128 * KiB, 2048,
       false},
      {"t4",     "Tesla T4 (profile)",
       7,        5,
       40,       1024,
       32,       16,
       1024,     65536,
       65536,    256,
       255,      4,
       64 * KiB, 48 * KiB,
       64 * KiB, 256,
       0,        8.1e12,
       320e9,    4 * MiB,
       16 * GiB, 1590000,
       96 * KiB, 2048,
       false},
  };
}

std::size_t round_up(std::size_t x, std::size_t unit) { return (x + unit - 1) / unit * unit; }

}  // namespace

const std::vector<DeviceProfile>& device_profiles() {
  static const std::vector<DeviceProfile> profiles = make_profiles();
  return profiles;
}

const DeviceProfile& device_profile(const std::string& key) {
  std::string known;
  for (const DeviceProfile& p : device_profiles()) {
    if (key == p.key) return p;
    known += known.empty() ? "" : ", ";
    known += p.key;
  }
  throw std::invalid_argument("unknown emulated device profile '" + key + "' (known: " + known +
                              ")");
}

const DeviceProfile& current_device_profile() {
  static const DeviceProfile& p = [&]() -> const DeviceProfile& {
    const char* env = std::getenv("MINITRAIN_EMU_DEVICE");
    return device_profile(env && *env ? env : "h100");
  }();
  return p;
}

Occupancy theoretical_occupancy(const DeviceProfile& p, int threads, int regs,
                                std::size_t smem_per_block) {
  if (threads <= 0)
    throw std::invalid_argument("occupancy: threads per block must be positive, got " +
                                std::to_string(threads));
  Occupancy o;
  const int warps_per_block = (threads + 31) / 32;

  // Warps (cudaOccMaxBlocksPerSMWarpsLimit; partitioned global caching off).
  o.limit_warps = threads > p.max_threads_per_block ? 0 : p.max_warps_per_sm / warps_per_block;
  o.limit_blocks = p.max_blocks_per_sm;

  // Registers (cudaOccMaxBlocksPerSMRegsLimit): allocated per warp in units of reg_alloc_unit,
  // split among the sub-partitions; the per-block check rounds the warps up to the partitions.
  o.registers_known = regs >= 0;
  if (!o.registers_known) {
    o.limit_registers = -1;
  } else {
    const int per_warp = int(round_up(std::size_t(regs) * 32, std::size_t(p.reg_alloc_unit)));
    const int per_block = per_warp * warps_per_block;
    const int assumed =
        per_warp * int(round_up(std::size_t(warps_per_block), std::size_t(p.sub_partitions)));
    if (p.regs_per_block < assumed || p.regs_per_block < per_block || regs > p.max_regs_per_thread)
      o.limit_registers = 0;
    else if (per_warp == 0)
      o.limit_registers = INT_MAX;
    else
      o.limit_registers =
          (p.regs_per_sm / p.sub_partitions / per_warp) * p.sub_partitions / warps_per_block;
  }

  // Shared memory (cudaOccMaxBlocksPerSMSmemLimit, default carveout: all of it shared; the block
  // opted in to as much dynamic shared memory as it launched with).
  o.smem_allocated_per_block =
      round_up(smem_per_block + p.reserved_smem_per_block, std::size_t(p.smem_alloc_unit));
  if (o.smem_allocated_per_block > p.smem_per_block_optin + p.reserved_smem_per_block)
    o.limit_shared_mem = 0;
  else if (o.smem_allocated_per_block == 0)
    o.limit_shared_mem = INT_MAX;
  else
    o.limit_shared_mem = int(p.smem_per_sm / o.smem_allocated_per_block);

  struct Limit {
    const char* name;
    int blocks;
  };
  const Limit limits[] = {{"registers", o.registers_known ? o.limit_registers : INT_MAX},
                          {"shared_mem", o.limit_shared_mem},
                          {"warps", o.limit_warps},
                          {"blocks", o.limit_blocks}};
  const Limit* least = &limits[0];
  for (const Limit& l : limits)
    if (l.blocks < least->blocks) least = &l;
  o.limiter = least->name;
  o.blocks_per_sm = least->blocks;
  o.warps_per_sm = o.blocks_per_sm * warps_per_block;
  o.occupancy_pct = 100.0 * o.warps_per_sm / p.max_warps_per_sm;
  return o;
}

RooflineModel roofline_model(const DeviceProfile& p, double flops, double bytes,
                             double overhead_s) {
  if (flops < 0 || bytes < 0 || overhead_s < 0)
    throw std::invalid_argument("roofline_model: negative input (flops " + std::to_string(flops) +
                                ", bytes " + std::to_string(bytes) + ", overhead " +
                                std::to_string(overhead_s) + " s)");
  RooflineModel m;
  m.flops = flops, m.bytes = bytes, m.overhead_s = overhead_s;
  m.intensity = bytes > 0 ? flops / bytes : 0;
  m.ridge = p.fp32_flops / p.dram_bytes_per_s;
  m.compute_s = flops / p.fp32_flops;
  m.memory_s = bytes / p.dram_bytes_per_s;
  const double busy = std::max(m.compute_s, m.memory_s);
  m.time_s = busy + overhead_s;
  m.bound = overhead_s > busy ? "overhead" : (m.compute_s >= m.memory_s ? "compute" : "memory");
  if (m.time_s > 0) {
    m.gflops = flops / m.time_s / 1e9;
    if (flops > 0) {
      const double roof =
          bytes > 0 ? std::min(p.fp32_flops, m.intensity * p.dram_bytes_per_s) : p.fp32_flops;
      m.pct_of_roof = 100.0 * (flops / m.time_s) / roof;
    } else {
      m.pct_of_roof = 100.0 * (bytes / m.time_s) / p.dram_bytes_per_s;
    }
  }
  return m;
}

L2Traffic l2_traffic(const DeviceProfile& p, const LaunchCounters& c, const Occupancy& o) {
  constexpr double kSector = 32;
  L2Traffic t;
  const double blocks = double(c.grid[0]) * c.grid[1] * c.grid[2];
  const double per_sm = std::ceil(blocks / p.sms);  // blocks spread evenly over the SMs
  t.resident_blocks = int(std::min<double>(o.blocks_per_sm, per_sm));
  t.footprint_bytes = double(t.resident_blocks) * double(c.max_block_load_bytes);
  t.l1_cache_bytes =
      std::max(0.0, double(p.l1_smem_per_sm) -
                        double(t.resident_blocks) * double(o.smem_allocated_per_block));
  t.reuse_fits_l1 = t.footprint_bytes <= t.l1_cache_bytes;
  t.load_bytes =
      kSector * double(t.reuse_fits_l1 ? c.block_distinct_load_sectors : c.global_load_sectors);
  t.store_bytes = kSector * double(c.global_store_sectors);
  t.atomic_bytes = kSector * double(c.global_atomic_sectors);
  t.bytes = t.load_bytes + t.store_bytes + t.atomic_bytes;
  return t;
}

RooflineLevels roofline_levels(const DeviceProfile& p, double flops, double dram_bytes,
                               double l2_bytes, double l1_bytes, double overhead_s) {
  if (flops < 0 || dram_bytes < 0 || l2_bytes < 0 || l1_bytes < 0 || overhead_s < 0)
    throw std::invalid_argument(
        "roofline_levels: negative input (flops " + std::to_string(flops) + ", DRAM bytes " +
        std::to_string(dram_bytes) + ", L2 bytes " + std::to_string(l2_bytes) + ", L1 bytes " +
        std::to_string(l1_bytes) + ", overhead " + std::to_string(overhead_s) + " s)");
  RooflineLevels m;
  m.flops = flops, m.dram_bytes = dram_bytes, m.l2_bytes = l2_bytes, m.l1_bytes = l1_bytes;
  m.overhead_s = overhead_s;
  m.compute_s = flops / p.fp32_flops;
  m.dram_s = dram_bytes / p.dram_bytes_per_s;
  m.l2_s = l2_bytes / p.l2_bytes_per_s();
  m.l1_s = l1_bytes / p.l1_bytes_per_s();
  const double busy = std::max({m.compute_s, m.dram_s, m.l2_s, m.l1_s});
  m.time_s = busy + overhead_s;
  m.bound = overhead_s > busy     ? "overhead"
            : busy == m.compute_s ? "compute"
            : busy == m.dram_s    ? "dram"
            : busy == m.l2_s      ? "l2"
                                  : "l1";
  m.gflops = m.time_s > 0 ? flops / m.time_s / 1e9 : 0;
  return m;
}

}  // namespace mtemu
