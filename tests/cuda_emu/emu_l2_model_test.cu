// The roofline's L2 level (cuda_emu/occupancy.h: l2_traffic, roofline_levels;
// docs/emulator_counters.md, "The roofline's L2 level"): the bytes each launch asks of L2, derived
// by hand from the kernel's access pattern, and the level that bounds the modelled time. Buffers
// come from cudaMalloc, 256-byte aligned, so sector boundaries are known. Blocks of 256 threads;
// n = 1001 floats is 4 blocks, the last with 233 threads (elements 768..1000).

#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "cuda_emu/counters.h"
#include "cuda_emu/occupancy.h"
#include "emu_counters_util.h"
#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

constexpr int kN = 1001;
constexpr int kThreads = 256;
constexpr int kBlocks = (kN + kThreads - 1) / kThreads;

__global__ void l2_copy_strided_kernel(const float* in, float* out, int n, int stride) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i * stride];
}
// Every warp reads the same 32 floats: reuse within a block, which L1 serves.
__global__ void l2_same_row_kernel(const float* in, float* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i % 32];
}
// A gather: lane t of every block reads x[8 t] (one sector per lane), so every block reads the
// same 256 sectors: reuse between blocks, which only L2 serves.
__global__ void l2_gather_kernel(const float* x, float* y, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] = x[(i * 8) % 2048];
}

__global__ void l2_count_kernel(int* counter, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(counter, 1);
}

// The launch's occupancy on `p` as the model takes it: these kernels are not in the register
// table, so the register limit is left out.
mtemu::Occupancy occupancy_of(const mtemu::DeviceProfile& p, const mtemu::LaunchCounters& c) {
  return mtemu::theoretical_occupancy(p, int(c.block[0] * c.block[1] * c.block[2]), -1,
                                      c.dynamic_smem);
}

TEST(CudaEmuL2Model, CoalescedAndStridedCopies) {
  const mtemu::DeviceProfile& h100 = mtemu::device_profile("h100");
  DeviceBuffer<float> in(32 * kN), out(kN);
  // Coalesced: blocks 0..2 read 256 floats each, 32 sectors; block 3 floats 768..1000 (bytes
  // 3072..4003): sectors 96..125, 30. Each sector once per block, so the block-distinct sectors
  // are the load sectors, 126; stores alike, 126. L2: (126 + 126) x 32 = 8064 bytes, the same as
  // the distinct bytes (nothing is read twice).
  mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { l2_copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, 1); });
  EXPECT_EQ(c.global_load_sectors, 126u);
  EXPECT_EQ(c.block_distinct_load_sectors, 126u);
  EXPECT_EQ(c.max_block_load_bytes, 32u * 32);
  mtemu::L2Traffic t = mtemu::l2_traffic(h100, c, occupancy_of(h100, c));
  // 4 blocks on 132 SMs: one block per SM (8 would fit); footprint 1 KiB against 256 KiB less
  // the block's 1 KiB of reserved shared memory.
  EXPECT_EQ(t.resident_blocks, 1);
  EXPECT_DOUBLE_EQ(t.footprint_bytes, 1024.0);
  EXPECT_DOUBLE_EQ(t.l1_cache_bytes, 255.0 * 1024);
  EXPECT_TRUE(t.reuse_fits_l1);
  EXPECT_DOUBLE_EQ(t.load_bytes, 126.0 * 32);
  EXPECT_DOUBLE_EQ(t.store_bytes, 126.0 * 32);
  EXPECT_DOUBLE_EQ(t.bytes, 8064.0);
  EXPECT_DOUBLE_EQ(t.bytes, double(c.distinct_bytes_touched));

  // Stride 2: block 0 reads floats 0, 2, ..., 510 (bytes 0..2043), sectors 0..63: 64; blocks 1
  // and 2 alike; block 3 floats 1536..2000 (bytes 6144..8003), sectors 192..250: 59. 251 in all,
  // as many as the load sectors (31 x 8 + 3): half of every sector is read for nothing, and L2
  // carries it. L2: (251 + 126) x 32 = 12064 bytes.
  c = counters_of_one_launch(
      [&] { l2_copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, 2); });
  EXPECT_EQ(c.global_load_sectors, 251u);
  EXPECT_EQ(c.block_distinct_load_sectors, 251u);
  EXPECT_EQ(c.max_block_load_bytes, 64u * 32);
  t = mtemu::l2_traffic(h100, c, occupancy_of(h100, c));
  EXPECT_DOUBLE_EQ(t.load_bytes, 251.0 * 32);
  EXPECT_DOUBLE_EQ(t.bytes, 12064.0);
  // Stride 32: a sector per lane, 1001 sectors, each once.
  c = counters_of_one_launch(
      [&] { l2_copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, 32); });
  EXPECT_EQ(c.block_distinct_load_sectors, 1001u);
  EXPECT_DOUBLE_EQ(mtemu::l2_traffic(h100, c, occupancy_of(h100, c)).bytes, (1001.0 + 126) * 32);
}

TEST(CudaEmuL2Model, ReuseWithinABlockStaysInL1) {
  const mtemu::DeviceProfile& h100 = mtemu::device_profile("h100");
  DeviceBuffer<float> in(32), out(kN);
  // Every warp reads in[0..31]: 4 sectors per full warp and 2 for the last (in[0..8], bytes
  // 0..35), 31 x 4 + 2 = 126 load sectors; but each block touches the same 4 sectors, so
  // 4 blocks x 4 = 16 reach L2 (and 4 reach DRAM).
  const mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { l2_same_row_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN); });
  EXPECT_EQ(c.global_load_sectors, 126u);
  EXPECT_EQ(c.block_distinct_load_sectors, 16u);
  EXPECT_EQ(c.distinct_bytes_touched, (4u + 126u) * 32);
  const mtemu::L2Traffic t = mtemu::l2_traffic(h100, c, occupancy_of(h100, c));
  EXPECT_DOUBLE_EQ(t.load_bytes, 16.0 * 32);
  EXPECT_DOUBLE_EQ(t.bytes, (16.0 + 126) * 32);
}

TEST(CudaEmuL2Model, TheBoundFlipsFromDramToL2WhereTheHandDerivationSays) {
  // The gather with B blocks of 256 threads: every block reads sectors 0..255 of x (8 KiB; one
  // per lane, 32 per request) and writes its 256 floats (1 KiB). L2 gets each block's 8 KiB and
  // 1 KiB: 9216 B bytes; DRAM the distinct bytes, 8192 + 1024 B. On H100, L2 at 5120 B/clk x
  // 1.98 GHz = 10.1376 TB/s, DRAM at 3.35 TB/s: L2 takes longer when
  // 9216 B / 10.1376 > (8192 + 1024 B) / 3.35, i.e. 20492.7 B > 83047.2, B > 4.05:
  // 4 blocks are DRAM bound (3.636 ns of L2, 3.668 ns of DRAM), 5 are L2 bound (4.545 against
  // 3.974). L1 (global sectors x 32 = 9216 B bytes at 33.45 TB/s) is never the longest.
  const mtemu::DeviceProfile& h100 = mtemu::device_profile("h100");
  EXPECT_DOUBLE_EQ(h100.l2_bytes_per_s(), 5120 * 1.98e9);
  DeviceBuffer<float> x(2048), y(5 * 256);
  for (const int blocks : {4, 5}) {
    const int n = blocks * 256;
    const mtemu::LaunchCounters c = counters_of_one_launch(
        [&] { l2_gather_kernel<<<blocks, kThreads>>>(x.get(), y.get(), n); });
    EXPECT_EQ(c.global_load_sectors, uint64_t(blocks) * 256);
    EXPECT_EQ(c.block_distinct_load_sectors, uint64_t(blocks) * 256);
    EXPECT_EQ(c.distinct_bytes_touched, 8192u + 1024u * blocks);
    const mtemu::L2Traffic t = mtemu::l2_traffic(h100, c, occupancy_of(h100, c));
    EXPECT_TRUE(t.reuse_fits_l1);
    EXPECT_DOUBLE_EQ(t.bytes, 9216.0 * blocks);
    const mtemu::RooflineLevels m = mtemu::roofline_levels(
        h100, 0, double(c.distinct_bytes_touched), t.bytes, double(c.bytes_moved), 0);
    EXPECT_DOUBLE_EQ(m.l2_s, 9216.0 * blocks / 10.1376e12);
    EXPECT_DOUBLE_EQ(m.dram_s, (8192.0 + 1024 * blocks) / 3.35e12);
    EXPECT_STREQ(m.bound, blocks == 4 ? "dram" : "l2") << blocks << " blocks";
    EXPECT_DOUBLE_EQ(m.time_s, std::max(m.l2_s, m.dram_s));
  }
}

TEST(CudaEmuL2Model, ReuseThatDoesNotFitL1GoesToL2EveryTime) {
  // T4: 96 KiB of L1 + shared memory per SM, 40 SMs. 80 blocks of a kernel whose largest block
  // reads 40 KiB distinct, 2 blocks per SM, 8 KiB of shared memory each (allocated): the two
  // blocks' 80 KiB fit the 96 - 16 = 80 KiB left, so L2 sees each block's distinct sectors. With
  // 9 KiB of shared memory each, 78 KiB are left: no reuse, every load sector goes to L2.
  const mtemu::DeviceProfile& t4 = mtemu::device_profile("t4");
  mtemu::LaunchCounters c;
  c.grid[0] = 80, c.grid[1] = 1, c.grid[2] = 1;
  c.global_load_sectors = 10000;
  c.block_distinct_load_sectors = 4000;
  c.max_block_load_bytes = 40 * 1024;
  c.global_store_sectors = 100;
  c.global_atomic_sectors = 3;
  mtemu::Occupancy o;
  o.blocks_per_sm = 2;
  o.smem_allocated_per_block = 8 * 1024;
  mtemu::L2Traffic t = mtemu::l2_traffic(t4, c, o);
  EXPECT_EQ(t.resident_blocks, 2);
  EXPECT_DOUBLE_EQ(t.footprint_bytes, 80.0 * 1024);
  EXPECT_DOUBLE_EQ(t.l1_cache_bytes, 80.0 * 1024);
  EXPECT_TRUE(t.reuse_fits_l1);
  EXPECT_DOUBLE_EQ(t.bytes, (4000.0 + 100 + 3) * 32);
  o.smem_allocated_per_block = 9 * 1024;
  t = mtemu::l2_traffic(t4, c, o);
  EXPECT_FALSE(t.reuse_fits_l1);
  EXPECT_DOUBLE_EQ(t.load_bytes, 10000.0 * 32);
  EXPECT_DOUBLE_EQ(t.atomic_bytes, 3.0 * 32);
  // 40 blocks on 40 SMs: one each, 40 KiB fits.
  c.grid[0] = 40;
  t = mtemu::l2_traffic(t4, c, o);
  EXPECT_EQ(t.resident_blocks, 1);
  EXPECT_TRUE(t.reuse_fits_l1);
}

TEST(CudaEmuL2Model, AtomicsGoToL2) {
  // 1001 atomicAdds on one int: one request per warp with active lanes (32), each one sector, all
  // performed at L2.
  const mtemu::DeviceProfile& h100 = mtemu::device_profile("h100");
  DeviceBuffer<int> counter(std::vector<int>{0});
  const mtemu::LaunchCounters c =
      counters_of_one_launch([&] { l2_count_kernel<<<kBlocks, kThreads>>>(counter.get(), kN); });
  EXPECT_EQ(c.global_atomic_requests, 32u);
  EXPECT_EQ(c.global_atomic_sectors, 32u);
  const mtemu::L2Traffic t = mtemu::l2_traffic(h100, c, occupancy_of(h100, c));
  EXPECT_DOUBLE_EQ(t.atomic_bytes, 32.0 * 32);
  EXPECT_DOUBLE_EQ(t.bytes, 32.0 * 32);
  EXPECT_EQ(counter.to_host()[0], kN);
}

TEST(CudaEmuL2Model, ProfilesL2BandwidthAndLevels) {
  // A100: NVIDIA's published 5120 bytes/clk at 1.41 GHz = 7.2192 TB/s; the others are assumed.
  const mtemu::DeviceProfile& a100 = mtemu::device_profile("a100");
  EXPECT_TRUE(a100.l2_published);
  EXPECT_DOUBLE_EQ(a100.l2_bytes_per_s(), 7.2192e12);
  for (const char* key : {"h100", "h200", "l4", "rtx4090", "t4"})
    EXPECT_FALSE(mtemu::device_profile(key).l2_published) << key;
  EXPECT_DOUBLE_EQ(mtemu::device_profile("t4").l2_bytes_per_s(), 2048 * 1.59e9);
  // The levels: 1 GFLOP and 1 GB through every level on H100; compute 14.95 us, DRAM 298.5 us,
  // L2 98.6 us, L1 29.9 us: DRAM bound, plus 3 us.
  const mtemu::RooflineLevels m =
      mtemu::roofline_levels(mtemu::device_profile("h100"), 1e9, 1e9, 1e9, 1e9);
  EXPECT_STREQ(m.bound, "dram");
  EXPECT_NEAR(m.time_s, 1e9 / 3.35e12 + 3e-6, 1e-15);
  EXPECT_NEAR(m.l2_s, 1e9 / 10.1376e12, 1e-15);
  EXPECT_NEAR(m.l1_s, 1e9 / (128 * 132 * 1.98e9), 1e-15);
  EXPECT_STREQ(mtemu::roofline_levels(mtemu::device_profile("h100"), 1e3, 1e3, 1e3, 1e3).bound,
               "overhead");
  EXPECT_THROW(mtemu::roofline_levels(mtemu::device_profile("h100"), 0, 0, -1, 0),
               std::invalid_argument);
}

}  // namespace
}  // namespace minitrain::emu_testing
