// The emulated GPU's memory counters (cuda_emu/counters.h, docs/emulator_counters.md): each count
// derived by hand from the kernel's access pattern. Buffers come from cudaMalloc, 256-byte
// aligned, so sector boundaries are known. n = 1001 floats: 31 full warps and a last warp of 9
// active lanes (elements 992..1000).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <vector>

#include "cuda_emu/counters.h"
#include "cuda_emu/kernel_registers.h"
#include "cuda_emu/occupancy.h"
#include "emu_counters_util.h"
#include "emu_test_util.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"

namespace minitrain::emu_testing {
namespace {

constexpr int kN = 1001;
constexpr int kThreads = 256;
constexpr int kBlocks = (kN + kThreads - 1) / kThreads;

__global__ void copy_strided_kernel(const float* in, float* out, int n, int stride, int shift) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i * stride + shift];
}
__global__ void scatter_kernel(const float* in, float* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[2 * i] = in[i];
}
__global__ void copy_float2_kernel(const float2* in, float2* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i];
}
__global__ void copy_float4_kernel(const float4* in, float4* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i];
}
__global__ void count_kernel(int* counter, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) atomicAdd(counter, 1);
}

// Global loads of one copy; stores are the coalesced 4 sectors per full warp, 2 for the last.
void expect_copy(const mtemu::LaunchCounters& c, uint64_t load_sectors) {
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_load_sectors, load_sectors);
  EXPECT_EQ(c.global_store_requests, 32u);
  EXPECT_EQ(c.global_store_sectors, 31u * 4 + 2);
  EXPECT_EQ(c.shared_load_requests + c.shared_store_requests, 0u);
  EXPECT_DOUBLE_EQ(c.active_lanes_mean, 1001.0 / 32);
  EXPECT_EQ(c.warps_launched, uint64_t(kBlocks) * kThreads / 32);
  EXPECT_EQ(c.bytes_moved, (load_sectors + 126) * 32);
}

TEST(CudaEmuCounters, GlobalSectorsPerRequest) {
  DeviceBuffer<float> in(32 * kN + 1), out(2 * kN);
  const auto copy = [&](int stride, int shift) {
    return counters_of_one_launch([&] {
      copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, stride, shift);
    });
  };
  // Coalesced: 4 sectors per full warp; the last warp's 9 floats (bytes 3968..4003) span 2.
  mtemu::LaunchCounters c = copy(1, 0);
  expect_copy(c, 31 * 4 + 2);
  EXPECT_EQ(c.kernel, "copy_strided_kernel");
  EXPECT_EQ(c.distinct_bytes_touched, (126u + 126u) * 32);  // in and out, 126 sectors each
  // Stride 2: 8 per full warp; the last reads floats 1984..2000 (bytes 7936..8003): 3 sectors.
  expect_copy(copy(2, 0), 31 * 8 + 3);
  // Stride 32: a sector per lane.
  expect_copy(copy(32, 0), 31 * 32 + 9);
  // Every lane the same float: 1 sector per request.
  expect_copy(copy(0, 0), 32);
  // Shifted by one float: bytes 4..131 of each warp's span, 5 sectors; the last reads bytes
  // 3972..4007: 2.
  expect_copy(copy(1, 1), 31 * 5 + 2);
}

TEST(CudaEmuCounters, VectorAccessesSpanSectors) {
  DeviceBuffer<float2> in2(kN), out2(kN);
  DeviceBuffer<float4> in4(kN), out4(kN);
  // float2: 256 bytes per full warp, 8 sectors; the last warp's 72 bytes from 7936: 3.
  mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { copy_float2_kernel<<<kBlocks, kThreads>>>(in2.get(), out2.get(), kN); });
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_load_sectors, 31u * 8 + 3);
  EXPECT_EQ(c.global_store_sectors, 31u * 8 + 3);
  // float4: 16 per full warp; the last warp's 144 bytes from 15872: 5.
  c = counters_of_one_launch(
      [&] { copy_float4_kernel<<<kBlocks, kThreads>>>(in4.get(), out4.get(), kN); });
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_load_sectors, 31u * 16 + 5);
  EXPECT_EQ(c.global_store_requests, 32u);
  EXPECT_EQ(c.global_store_sectors, 31u * 16 + 5);
}

TEST(CudaEmuCounters, StoresAndAtomicsCountedApart) {
  DeviceBuffer<float> in(kN), out(2 * kN);
  // Stores at stride 2: 8 sectors per full warp, 3 for the last (as the loads above).
  mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { scatter_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN); });
  EXPECT_EQ(c.global_load_sectors, 31u * 4 + 2);
  EXPECT_EQ(c.global_store_requests, 32u);
  EXPECT_EQ(c.global_store_sectors, 31u * 8 + 3);
  // Atomics: one request per warp that has active lanes, and no loads or stores.
  DeviceBuffer<int> counter(std::vector<int>{0});
  c = counters_of_one_launch([&] { count_kernel<<<kBlocks, kThreads>>>(counter.get(), kN); });
  EXPECT_EQ(c.global_atomic_requests, 32u);
  EXPECT_EQ(c.global_load_requests + c.global_store_requests, 0u);
  EXPECT_EQ(counter.to_host()[0], kN);
}

// ---- stores whose check GCC drops (Note [stores GCC leaves unchecked], unchecked_stores.h) ----

__global__ void scale_in_place_kernel(float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] *= 2.f;  // the store's check is dominated by the load's
}
__global__ void store_twice_kernel(float* x, const float* z, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    x[i] = -1.f;  // kept: z[i] below may be x[i]
    const float y = z[i];
    x[i] = y + 3.f;  // its check is dominated by the first store's
  }
}
__global__ void add_one_kernel(const float* in, float* out, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = in[i] + 1.f;  // two pointers: both accesses checked, even when in == out
}
__global__ void load_then_count_kernel(int* counter, int* seen, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    const int before = *counter;
    atomicAdd(counter, 1);  // changes what the load saw: an atomic, no hidden store
    seen[i] = before;
  }
}

__global__ void accumulate_kernel(float* c, const float* a, int n, int k) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n)
    for (int j = 0; j < k; ++j) c[i] += a[j * n + i];  // a may be c: c[i] is reloaded each time
}
__global__ void scale_then_sum_kernel(float* x, const float* z, float* sum, int n, int k) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) {
    x[i] *= 2.f;
    float s = 0.f;
    for (int j = 0; j < k; ++j) s += z[j * n + i];  // more loads than the emulator remembers
    sum[i] = s;
  }
}

TEST(CudaEmuCounters, AReadModifyWritesStoreIsCounted) {
  std::vector<float> host(kN);
  for (int i = 0; i < kN; ++i) host[i] = float(i) - 500.f;
  DeviceBuffer<float> x(host);
  const mtemu::LaunchCounters c =
      counters_of_one_launch([&] { scale_in_place_kernel<<<kBlocks, kThreads>>>(x.get(), kN); });
  // Loads and stores alike: 32 requests, 4 sectors per full warp and 2 for the last.
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_load_sectors, 31u * 4 + 2);
  EXPECT_EQ(c.global_store_requests, 32u);
  EXPECT_EQ(c.global_store_sectors, 31u * 4 + 2);
  const std::vector<float> got = x.to_host();
  for (int i : {0, 1, 500, kN - 1}) EXPECT_EQ(got[std::size_t(i)], 2.f * host[std::size_t(i)]);
}

TEST(CudaEmuCounters, EachReadModifyWriteOfALoopIsCounted) {
  constexpr int kSteps = 5;
  DeviceBuffer<float> c(std::vector<float>(kN, 0.f)), a(std::vector<float>(kSteps * kN, 1.f));
  const mtemu::LaunchCounters got = counters_of_one_launch(
      [&] { accumulate_kernel<<<kBlocks, kThreads>>>(c.get(), a.get(), kN, kSteps); });
  EXPECT_EQ(got.global_load_requests, 32u * 2 * kSteps);  // c[i] and a[j * n + i] per step
  EXPECT_EQ(got.global_store_requests, 32u * kSteps);
  EXPECT_EQ(got.global_store_sectors, uint64_t(31 * 4 + 2) * kSteps);
  EXPECT_EQ(c.to_host()[kN - 1], float(kSteps));
}

TEST(CudaEmuCounters, AHiddenStoreIsCountedWhenItsLoadIsForgotten) {
  constexpr int kSteps = 12;  // > the 8 accesses the emulator remembers (unchecked_stores.cpp)
  DeviceBuffer<float> x(std::vector<float>(kN, 3.f)), z(std::vector<float>(kSteps * kN, 1.f)),
      sum(kN);
  const mtemu::LaunchCounters c = counters_of_one_launch([&] {
    scale_then_sum_kernel<<<kBlocks, kThreads>>>(x.get(), z.get(), sum.get(), kN, kSteps);
  });
  EXPECT_EQ(c.global_load_requests, 32u * (1 + kSteps));
  EXPECT_EQ(c.global_store_requests, 32u * 2);  // x[i] and sum[i]
  EXPECT_EQ(x.to_host()[0], 6.f);
  EXPECT_EQ(sum.to_host()[kN - 1], float(kSteps));
}

TEST(CudaEmuCounters, ASecondStoreToTheSameAddressIsCounted) {
  DeviceBuffer<float> x(kN), z(std::vector<float>(kN, 4.f));
  const mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { store_twice_kernel<<<kBlocks, kThreads>>>(x.get(), z.get(), kN); });
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_store_requests, 64u);
  EXPECT_EQ(c.global_store_sectors, 2u * (31 * 4 + 2));
  EXPECT_EQ(x.to_host()[7], 7.f);
}

TEST(CudaEmuCounters, ACheckedStoreAfterALoadIsCountedOnce) {
  DeviceBuffer<float> x(std::vector<float>(kN, 1.f));
  const mtemu::LaunchCounters c =
      counters_of_one_launch([&] { add_one_kernel<<<kBlocks, kThreads>>>(x.get(), x.get(), kN); });
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_store_requests, 32u);
  EXPECT_EQ(x.to_host()[kN - 1], 2.f);
}

TEST(CudaEmuCounters, AnAtomicAfterALoadIsNoStore) {
  DeviceBuffer<int> counter(std::vector<int>{0}), seen(kN);
  const mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { load_then_count_kernel<<<kBlocks, kThreads>>>(counter.get(), seen.get(), kN); });
  EXPECT_EQ(c.global_load_requests, 32u);
  EXPECT_EQ(c.global_atomic_requests, 32u);
  EXPECT_EQ(c.global_store_requests, 32u);  // seen[i] only
  EXPECT_EQ(counter.to_host()[0], kN);
}

// ---- shared memory ----

template <int Cols>
__global__ void transpose_tile_kernel(const float* in, float* out) {
  __shared__ float tile[32][Cols];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  tile[ty][tx] = in[ty * 32 + tx];  // a row per warp: 32 banks, 1 wavefront
  __syncthreads();
  out[ty * 32 + tx] = tile[tx][ty];  // down a column
}

__global__ void shared_pattern_kernel(float* out, int mode) {
  __shared__ float words[64];
  const int t = int(threadIdx.x);
  words[t] = float(t);
  words[32 + t] = float(t);
  __syncthreads();
  out[t] = mode == 0 ? words[0] : words[2 * t];
}

TEST(CudaEmuCounters, SharedWavefrontsAndBankConflicts) {
  DeviceBuffer<float> in(1024), out(1024);
  // Unpadded: a column lies in one bank, 32 distinct words: 32 wavefronts, 31 conflicts per read.
  mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { transpose_tile_kernel<32><<<1, dim3(32, 32)>>>(in.get(), out.get()); });
  EXPECT_EQ(c.shared_store_requests, 32u);
  EXPECT_EQ(c.shared_store_wavefronts, 32u);
  EXPECT_EQ(c.shared_load_requests, 32u);
  EXPECT_EQ(c.shared_load_wavefronts, 32u * 32);
  EXPECT_EQ(c.shared_bank_conflicts, 32u * 31);
  EXPECT_EQ(c.barriers, 32u);  // one __syncthreads per warp
  // Padded to 33 columns: the column's words fall in 32 banks.
  c = counters_of_one_launch(
      [&] { transpose_tile_kernel<33><<<1, dim3(32, 32)>>>(in.get(), out.get()); });
  EXPECT_EQ(c.shared_load_wavefronts, 32u);
  EXPECT_EQ(c.shared_bank_conflicts, 0u);
  // All lanes one word: a broadcast, 1 wavefront.
  c = counters_of_one_launch([&] { shared_pattern_kernel<<<1, 32>>>(out.get(), 0); });
  EXPECT_EQ(c.shared_store_requests, 2u);
  EXPECT_EQ(c.shared_store_wavefronts, 2u);
  EXPECT_EQ(c.shared_load_requests, 1u);
  EXPECT_EQ(c.shared_load_wavefronts, 1u);
  EXPECT_EQ(c.shared_bank_conflicts, 0u);
  // Stride 2: words 0, 2, .., 62 in the 16 even banks, 2 each: 2-way.
  c = counters_of_one_launch([&] { shared_pattern_kernel<<<1, 32>>>(out.get(), 1); });
  EXPECT_EQ(c.shared_load_wavefronts, 2u);
  EXPECT_EQ(c.shared_bank_conflicts, 1u);
}

TEST(CudaEmuCounters, SameResultsWithCountersOn) {
  std::vector<float> host(1024);
  for (int i = 0; i < 1024; ++i) host[i] = float(i) * 0.37f - 11.f;
  DeviceBuffer<float> in(host), out(1024);
  transpose_tile_kernel<32><<<1, dim3(32, 32)>>>(in.get(), out.get());
  EMU_OK(cudaDeviceSynchronize());
  const std::vector<float> off = out.to_host();
  EMU_OK(cudaMemset(out.get(), 0, 1024 * sizeof(float)));
  counters_of_one_launch(
      [&] { transpose_tile_kernel<32><<<1, dim3(32, 32)>>>(in.get(), out.get()); });
  const std::vector<float> on = out.to_host();
  EXPECT_EQ(std::memcmp(off.data(), on.data(), 1024 * sizeof(float)), 0);
  EXPECT_EQ(on[1], host[32]);
}

// ---- the GEMM ladder's first rungs, against the closed forms of their comments ----

namespace ladder = minitrain::gemm_ladder;

// Sectors of `count` consecutive floats from float offset `first` of a 256-byte aligned buffer.
uint64_t sectors(int64_t first, int64_t count) {
  return count <= 0 ? 0 : uint64_t((first + count - 1) / 8 - first / 8 + 1);
}

struct Expected {
  uint64_t load_requests = 0, load_sectors = 0, store_requests = 0, store_sectors = 0;
};

constexpr int64_t kM = 37, kN2 = 45, kK = 19;  // odd, and no multiple of a tile

mtemu::LaunchCounters run_rung(void (*launcher)(const ladder::GemmArgs&, CUstream_st*)) {
  DeviceBuffer<float> a(kM * kK), b(kK * kN2), c(kM * kN2);
  EXPECT_EQ(cudaMemset(a.get(), 0, kM * kK * sizeof(float)), cudaSuccess);
  EXPECT_EQ(cudaMemset(b.get(), 0, kK * kN2 * sizeof(float)), cudaSuccess);
  ladder::GemmArgs g{};
  g.c = c.get();
  g.a = ladder::Operand{a.get(), kK, kM, kK, false};
  g.b = ladder::Operand{b.get(), kN2, kK, kN2, false};
  g.m = kM, g.n = kN2, g.k = kK;
  g.alpha = 1.f, g.beta = 0.f;
  return counters_of_one_launch([&] { launcher(g, nullptr); });
}

void expect_rung(const mtemu::LaunchCounters& c, const Expected& e) {
  EXPECT_EQ(c.global_load_requests, e.load_requests);
  EXPECT_EQ(c.global_load_sectors, e.load_sectors);
  EXPECT_EQ(c.global_store_requests, e.store_requests);
  EXPECT_EQ(c.global_store_sectors, e.store_sectors);
  EXPECT_EQ(c.shared_load_requests + c.shared_store_requests + c.global_atomic_requests, 0u);
}

TEST(CudaEmuCounters, NaiveRungMatchesItsClosedForm) {
  // 16 x 16 C tiles, a warp = 16 consecutive rows x 2 adjacent columns. Per q: A's load touches
  // one sector per active row (rows are k floats apart: nothing coalesces), B's the 1 or 2
  // sectors of its two columns; C's store, per active row, the sectors of its columns.
  Expected e;
  for (int64_t r0 = 0; r0 < kM; r0 += 16)
    for (int64_t c0 = 0; c0 < kN2; c0 += 16)
      for (int w = 0; w < 8; ++w) {
        const int64_t col = c0 + 2 * w;
        const int64_t rows = std::min<int64_t>(16, kM - r0), cols = std::min<int64_t>(2, kN2 - col);
        if (cols <= 0) continue;
        e.load_requests += 2 * kK;
        for (int64_t q = 0; q < kK; ++q) e.load_sectors += rows + sectors(q * kN2 + col, cols);
        e.store_requests += 1;
        for (int64_t r = r0; r < r0 + rows; ++r) e.store_sectors += sectors(r * kN2 + col, cols);
      }
  const mtemu::LaunchCounters c = run_rung(&ladder::gemm_naive_cuda);
  expect_rung(c, e);
  EXPECT_EQ(run_rung(&ladder::gemm_naive_cuda).json(), c.json());  // deterministic
}

TEST(CudaEmuCounters, CoalescedRungMatchesItsClosedForm) {
  // 8 x 32 C tiles, a warp = 32 consecutive columns of one row. Per q: A's load is a broadcast
  // (1 sector), B's covers the warp's columns of row q; C's store the columns of its row.
  Expected e;
  for (int64_t r0 = 0; r0 < kM; r0 += 8)
    for (int64_t c0 = 0; c0 < kN2; c0 += 32)
      for (int w = 0; w < 8; ++w) {
        const int64_t row = r0 + w, cols = std::min<int64_t>(32, kN2 - c0);
        if (row >= kM) continue;
        e.load_requests += 2 * kK;
        for (int64_t q = 0; q < kK; ++q) e.load_sectors += 1 + sectors(q * kN2 + c0, cols);
        e.store_requests += 1;
        e.store_sectors += sectors(row * kN2 + c0, cols);
      }
  const mtemu::LaunchCounters c = run_rung(&ladder::gemm_coalesced_cuda);
  expect_rung(c, e);
  EXPECT_EQ(run_rung(&ladder::gemm_coalesced_cuda).json(), c.json());  // deterministic
}

// ---- occupancy per launch: the real compiler's registers (cuda_emu/kernel_registers.tsv) ----

TEST(CudaEmuCounters, EachLaunchCarriesItsOccupancyWithTheCompilersRegisters) {
  // The naive rung: 256 threads, no shared memory. The table's registers must be nvcc's for this
  // kernel, and the occupancy the calculator's for them on the selected profile.
  const mtemu::KernelRegisters* r = mtemu::kernel_registers(
      "/any/where/kernels/gemm/gemm_ladder/01_naive.cu", "gemm_naive_kernel");
  ASSERT_NE(r, nullptr) << "the naive rung is not in cuda_emu/kernel_registers.tsv";
  const mtemu::LaunchCounters c = run_rung(&ladder::gemm_naive_cuda);
  EXPECT_EQ(c.registers, r->registers_max);
  EXPECT_EQ(c.registers_min, r->registers_min);
  EXPECT_EQ(c.device_profile, mtemu::current_device_profile().key);
  const mtemu::Occupancy o = mtemu::theoretical_occupancy(mtemu::current_device_profile(), 256,
                                                          r->registers_max, r->static_smem_max);
  EXPECT_EQ(c.blocks_per_sm, o.blocks_per_sm);
  EXPECT_DOUBLE_EQ(c.occupancy_pct, o.occupancy_pct);
  EXPECT_EQ(c.occupancy_limiter, o.limiter);
  const std::string json = c.json();
  EXPECT_NE(json.find("\"registers\":" + std::to_string(r->registers_max) + ","), std::string::npos)
      << json;
  EXPECT_NE(json.find("\"occupancy_limiter\":\""), std::string::npos) << json;
}

TEST(CudaEmuCounters, AKernelTheTableDoesNotKnowHasUnknownRegistersAndAnUpperBound) {
  // This file's own kernel: not in the table. 256 threads on H100 without the register limit:
  // 8 blocks of 8 warps, 100 % (the figure is an upper bound, and the JSON says null).
  DeviceBuffer<float> in(kN), out(kN);
  const mtemu::LaunchCounters c = counters_of_one_launch(
      [&] { copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, 1, 0); });
  EXPECT_EQ(c.registers, -1);
  EXPECT_NE(c.json().find("\"registers\":null"), std::string::npos) << c.json();
  const mtemu::Occupancy o =
      mtemu::theoretical_occupancy(mtemu::current_device_profile(), kThreads, -1, 0);
  EXPECT_EQ(c.blocks_per_sm, o.blocks_per_sm);
  EXPECT_DOUBLE_EQ(c.occupancy_pct, o.occupancy_pct);
}

TEST(CudaEmuCounters, OfSeveralLaunchesTheOneWithTheMostRequestsDominates) {
  // One op that launches two kernels, as a GEMM variant with a main kernel and a small epilogue
  // would: the 1001-float copy (32 load and 32 store requests, 256 threads a block), then a copy
  // of 32 floats by one warp (1 and 1, 32 threads a block). Occupancy is each launch's own (on
  // every profile: 100 % at 256 threads, 50 % under the blocks-per-SM limit at 32 threads), so
  // the op's is the dominant launch's, whichever order they ran in; the last one's (what
  // `bench gemm --counters` took before) would be the epilogue's.
  DeviceBuffer<float> in(kN), out(kN);
  mtemu::counters_take();
  mtemu::counters_collect(true);
  copy_strided_kernel<<<kBlocks, kThreads>>>(in.get(), out.get(), kN, 1, 0);
  copy_strided_kernel<<<1, 32>>>(in.get(), out.get(), 32, 1, 0);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  mtemu::counters_collect(false);
  const std::vector<mtemu::LaunchCounters> got = mtemu::counters_take();
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(got[0].block[0], unsigned(kThreads));  // one stream: completion order is launch order
  EXPECT_EQ(got[0].memory_requests(), 64u);
  EXPECT_EQ(got[1].memory_requests(), 2u);
  EXPECT_NE(got[0].occupancy_pct, got[1].occupancy_pct);
  EXPECT_EQ(mtemu::dominant_launch(got), 0);
  EXPECT_EQ(mtemu::dominant_launch({got[1], got[0]}), 1);  // the epilogue first
  EXPECT_EQ(mtemu::dominant_launch({got[0], got[0]}), 0);  // equals: the earliest
  EXPECT_EQ(mtemu::dominant_launch({}), -1);
}

TEST(CudaEmuCounters, LookupIgnoresNamespacesAndTemplateArgumentsButNotTheFile) {
  const mtemu::KernelRegisters* fill = mtemu::kernel_registers("kernels/fill.cu", "fill_kernel<T>");
  ASSERT_NE(fill, nullptr);
  EXPECT_EQ(mtemu::kernel_registers("../../kernels/fill.cu", "minitrain::fill_kernel<float>"),
            fill);
  EXPECT_EQ(mtemu::kernel_registers("kernels/cast.cu", "fill_kernel<T>"), nullptr);
  EXPECT_EQ(mtemu::kernel_registers("other_kernels/fill.cu", "fill_kernel"), nullptr);
  EXPECT_NE(mtemu::kernel_registers_source().find("nvcc "), std::string::npos)
      << mtemu::kernel_registers_source();
}

}  // namespace
}  // namespace minitrain::emu_testing
