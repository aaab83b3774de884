// Device profiles and the occupancy calculator (cuda_emu/occupancy.h). Every figure below is
// worked by hand with the rules of the toolkit's cuda_occupancy.h: registers allocated per warp
// in units of 256, split among 4 sub-partitions; shared memory per block = static + dynamic + the
// driver's reserved 1 KiB (0 on T4), rounded up to 128 bytes (256 on T4).

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "cuda_emu/occupancy.h"

namespace minitrain::emu_testing {
namespace {

using mtemu::device_profile;
using mtemu::Occupancy;
using mtemu::theoretical_occupancy;

constexpr std::size_t KiB = 1024;

void expect_occupancy(const Occupancy& o, int warps, int blocks, int regs, int smem, int per_sm,
                      double pct, const char* limiter) {
  EXPECT_EQ(o.limit_warps, warps);
  EXPECT_EQ(o.limit_blocks, blocks);
  EXPECT_EQ(o.limit_registers, regs);
  EXPECT_EQ(o.limit_shared_mem, smem);
  EXPECT_EQ(o.blocks_per_sm, per_sm);
  EXPECT_DOUBLE_EQ(o.occupancy_pct, pct);
  EXPECT_STREQ(o.limiter, limiter);
}

TEST(CudaEmuOccupancy, RegisterLimited) {
  const auto& h100 = device_profile("h100");
  // 256 threads = 8 warps, 64 registers: 2048 per warp; 16384 per sub-partition hold 8 warps,
  // 32 per SM: 4 blocks, 32 of 64 warps. Warps alone allow 64/8 = 8 blocks; shared memory
  // (1 KiB reserved) 228 KiB / 1 KiB = 228.
  expect_occupancy(theoretical_occupancy(h100, 256, 64, 0), 8, 32, 4, 228, 4, 50.0, "registers");
  // 128 threads = 4 warps, 33 registers: 33 x 32 = 1056, rounded to 1280 per warp; 16384 / 1280
  // = 12 warps per sub-partition, 48 per SM: 12 blocks, 48 warps = 75 % (the granularity costs
  // a quarter: 32 registers would give 16 blocks).
  expect_occupancy(theoretical_occupancy(h100, 128, 33, 0), 16, 32, 12, 228, 12, 75.0, "registers");
  // Ties name the first of the least, in the order registers, shared_mem, warps, blocks.
  expect_occupancy(theoretical_occupancy(h100, 128, 32, 0), 16, 32, 16, 228, 16, 100.0,
                   "registers");
}

TEST(CudaEmuOccupancy, SharedMemoryLimited) {
  const auto& h100 = device_profile("h100");
  // 48 KiB + 1 KiB reserved = 50176 bytes (a multiple of 128): 233472 / 50176 = 4 blocks of 4
  // warps: 16 of 64 = 25 %.
  expect_occupancy(theoretical_occupancy(h100, 128, 32, 48 * KiB), 16, 32, 16, 4, 4, 25.0,
                   "shared_mem");
  // 1000 bytes + 1024 = 2024, rounded to 2048: 233472 / 2048 = 114 (not 115: the rounding).
  EXPECT_EQ(theoretical_occupancy(h100, 32, 16, 1000).limit_shared_mem, 114);
  // More than the opt-in maximum (227 KiB) per block: no block fits.
  const Occupancy none = theoretical_occupancy(h100, 128, 32, 227 * KiB + 1);
  EXPECT_EQ(none.limit_shared_mem, 0);
  EXPECT_EQ(none.blocks_per_sm, 0);
  // T4: 64 KiB per SM, no reserved memory, 256-byte units: 20 KiB static -> 3 blocks of 8 warps,
  // 24 of 32 warps = 75 %.
  expect_occupancy(theoretical_occupancy(device_profile("t4"), 256, 32, 20 * KiB), 4, 16, 8, 3, 3,
                   75.0, "shared_mem");
}

TEST(CudaEmuOccupancy, WarpAndBlockLimited) {
  const auto& h100 = device_profile("h100");
  // 768 threads = 24 warps: 64 / 24 = 2 blocks, 48 warps = 75 %; 16 registers allow 5.
  expect_occupancy(theoretical_occupancy(h100, 768, 16, 0), 2, 32, 5, 228, 2, 75.0, "warps");
  // 32 threads, 16 registers: warps allow 64 blocks, registers 128, the SM only 32: 50 %.
  expect_occupancy(theoretical_occupancy(h100, 32, 16, 0), 64, 32, 128, 228, 32, 50.0, "blocks");
  // L4 (sm_89): 48 warps, 24 blocks per SM, 100 KiB shared. 512 threads = 16 warps: 3 blocks,
  // 100 % (32 registers would allow 64 / 16 = 4); 96 threads = 3 warps: 16 blocks, 100 %.
  const auto& l4 = device_profile("l4");
  expect_occupancy(theoretical_occupancy(l4, 512, 32, 0), 3, 24, 4, 100, 3, 100.0, "warps");
  expect_occupancy(theoretical_occupancy(l4, 96, 32, 0), 16, 24, 21, 100, 16, 100.0, "warps");
  // More threads than a block may have: nothing fits.
  EXPECT_EQ(theoretical_occupancy(h100, 1025, 16, 0).blocks_per_sm, 0);
  EXPECT_THROW(theoretical_occupancy(h100, 0, 16, 0), std::invalid_argument);
}

TEST(CudaEmuOccupancy, TooManyRegistersPerBlockOrThread) {
  const auto& h100 = device_profile("h100");
  // 1024 threads x 65 registers: 2080 -> 2304 per warp x 32 warps = 73728 > 65536 registers per
  // block: the launch would fail (too many resources requested), no block fits.
  EXPECT_EQ(theoretical_occupancy(h100, 1024, 65, 0).limit_registers, 0);
  EXPECT_EQ(theoretical_occupancy(h100, 1024, 64, 0).limit_registers, 1);
  EXPECT_EQ(theoretical_occupancy(h100, 32, 256, 0).limit_registers, 0);
  // 4 warps of 255 registers: 8160, rounded to 8192 per warp; 16384 / 8160 = 2 per sub-partition, 8
  // per SM: 2.
  EXPECT_EQ(theoretical_occupancy(h100, 128, 255, 0).limit_registers, 2);
}

TEST(CudaEmuOccupancy, UnknownRegistersLeaveTheirLimitOut) {
  const Occupancy o = theoretical_occupancy(device_profile("h100"), 256, -1, 0);
  EXPECT_FALSE(o.registers_known);
  EXPECT_EQ(o.limit_registers, -1);
  EXPECT_EQ(o.blocks_per_sm, 8);
  EXPECT_STREQ(o.limiter, "warps");
}

TEST(CudaEmuOccupancy, ProfilesAndTheirLookup) {
  EXPECT_EQ(mtemu::device_profiles().size(), 6u);
  EXPECT_EQ(device_profile("a100").sms, 108);
  EXPECT_EQ(device_profile("rtx4090").max_warps_per_sm, 48);
  try {
    device_profile("h1000");
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'h1000'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("h100, h200, a100, l4, rtx4090, t4"), std::string::npos)
        << e.what();
  }
}

TEST(CudaEmuOccupancy, DevicePropertiesReportTheProfile) {
  // Without MINITRAIN_EMU_DEVICE: the H100 SXM profile; ctest runs this case with t4 too.
  const char* env = std::getenv("MINITRAIN_EMU_DEVICE");
  const auto& p = mtemu::current_device_profile();
  EXPECT_STREQ(p.key, env ? env : "h100");
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.multiProcessorCount, p.sms);
  EXPECT_EQ(prop.maxThreadsPerMultiProcessor, p.max_threads_per_sm);
  EXPECT_EQ(prop.major, p.major);
  EXPECT_EQ(prop.minor, p.minor);
  EXPECT_EQ(prop.sharedMemPerBlockOptin, p.smem_per_block_optin);
  EXPECT_EQ(std::size_t(prop.l2CacheSize), p.l2_bytes);
  EXPECT_NE(std::string(prop.name).find(p.name), std::string::npos) << prop.name;
}

// cudaOccupancyMaxActiveBlocksPerMultiprocessor on the default H100 profile, worked by hand: a
// kernel of this file is not in the register table, so the register limit is left out.
__global__ void occupancy_plain_kernel(float* out) { out[threadIdx.x] = 1.f; }
__global__ void occupancy_static_smem_kernel(float* out) {
  __shared__ float tile[10 * 1024];  // 40 KiB
  tile[threadIdx.x] = float(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = tile[threadIdx.x];
}

TEST(CudaEmuOccupancy, MaxActiveBlocksPerMultiprocessorFollowsTheCalculator) {
  if (std::getenv("MINITRAIN_EMU_DEVICE") != nullptr) GTEST_SKIP() << "figures for h100";
  int blocks = -1;
  // 128 threads = 4 warps: 64 / 4 = 16 blocks by warps (32 by the block cap).
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, occupancy_plain_kernel, 128, 0),
            cudaSuccess);
  EXPECT_EQ(blocks, 16);
  // 20 KiB of dynamic shared memory + the 1 KiB reserved: 228 KiB / 21 KiB = 10 blocks.
  ASSERT_EQ(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, occupancy_plain_kernel, 128, 20 * KiB),
      cudaSuccess);
  EXPECT_EQ(blocks, 10);
  // 40 KiB of static shared memory, known once the kernel has run: 228 / 41 = 5 blocks.
  float* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, 128 * sizeof(float)), cudaSuccess);
  occupancy_static_smem_kernel<<<1, 128>>>(out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
                &blocks, occupancy_static_smem_kernel, 128, 0, 0),
            cudaSuccess);
  EXPECT_EQ(blocks, 5);
  EXPECT_EQ(cudaFree(out), cudaSuccess);
  // A block the device cannot have.
  EXPECT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, occupancy_plain_kernel, 2048, 0),
            cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

TEST(CudaEmuOccupancy, AnUnknownProfileIsAnError) {
  // Run by ctest with MINITRAIN_EMU_DEVICE=h1000 (CudaEmuOccupancy.UnknownProfileEnv).
  const char* env = std::getenv("MINITRAIN_EMU_DEVICE");
  if (env == nullptr || std::string(env) != "h1000")
    GTEST_SKIP() << "needs MINITRAIN_EMU_DEVICE=h1000";
  cudaDeviceProp prop;
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 0), cudaErrorInvalidValue);
  EXPECT_THROW(mtemu::current_device_profile(), std::invalid_argument);
}

}  // namespace
}  // namespace minitrain::emu_testing

namespace minitrain::emu_testing {
namespace {

TEST(CudaEmuRoofline, ComputeBoundGemm) {
  // 256^3 GEMM on H100: 2 x 256^3 = 33554432 FLOPs, 3 matrices of 256 x 256 floats = 786432
  // bytes at least. Intensity 42.67 FLOP/B, above the ridge 66.9e12 / 3.35e12 = 19.97: compute
  // bound; 33554432 / 66.9e12 = 0.5016 us of compute (0.2348 us of DRAM) + 3 us of launch.
  const auto m = mtemu::roofline_model(mtemu::device_profile("h100"), 33554432.0, 786432.0, 0);
  EXPECT_NEAR(m.intensity, 42.667, 1e-3);
  EXPECT_NEAR(m.ridge, 19.970, 1e-3);
  EXPECT_NEAR(m.compute_s, 0.50156e-6, 1e-10);
  EXPECT_NEAR(m.memory_s, 0.23475e-6, 1e-10);
  EXPECT_STREQ(m.bound, "compute");
  EXPECT_NEAR(m.pct_of_roof, 100.0, 1e-9);
  const auto with_launch =
      mtemu::roofline_model(mtemu::device_profile("h100"), 33554432.0, 786432.0);
  EXPECT_NEAR(with_launch.time_s, 3.50156e-6, 1e-10);
  EXPECT_STREQ(with_launch.bound, "overhead");
  EXPECT_NEAR(with_launch.gflops, 9582.71, 0.01);
  EXPECT_NEAR(with_launch.pct_of_roof, 14.324, 1e-3);
}

TEST(CudaEmuRoofline, MemoryBoundCopy) {
  // A copy of 2^24 floats on the T4 profile: 128 MiB of traffic, no FLOPs:
  // 134217728 / 320e9 = 419.43 us, memory bound.
  const auto m = mtemu::roofline_model(mtemu::device_profile("t4"), 0, 134217728.0);
  EXPECT_NEAR(m.memory_s, 419.43e-6, 1e-9);
  EXPECT_NEAR(m.time_s, 422.43e-6, 1e-9);
  EXPECT_STREQ(m.bound, "memory");
  EXPECT_EQ(m.gflops, 0);
  EXPECT_NEAR(m.pct_of_roof, 100.0 * 419.43 / 422.43, 1e-3);
  EXPECT_THROW(mtemu::roofline_model(mtemu::device_profile("t4"), -1, 0), std::invalid_argument);
}

}  // namespace
}  // namespace minitrain::emu_testing
