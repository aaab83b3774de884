// racecheck (cuda_emu/racecheck.h, ASan builds): each kind of race it is for is reported, naming
// the kernel and line, and what orders accesses on a GPU (barriers, __syncwarp, atomics, the end
// of a grid) keeps correct kernels clean. A report is a device fault, which ends the device's
// context: each bug runs in a child process (a gtest death test).

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_emu/racecheck.h"
#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

class CudaEmuRacecheck : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (!mtemu::racecheck_enable(true)) GTEST_SKIP() << "racecheck needs the emu preset (ASan)";
  }
  void TearDown() override { mtemu::racecheck_enable(false); }
};

// Runs a launch and ends the process as a CHECK macro would where the kernel faulted.
template <class Launch>
void run_or_die(Launch launch) {
  launch();
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(e));
    std::abort();
  }
}

// ---- races, each reported

__global__ void neighbour_without_barrier_kernel(int* out) {
  __shared__ int s[64];
  s[threadIdx.x] = int(threadIdx.x);
  out[threadIdx.x] = s[(threadIdx.x + 1) % 64];  // no __syncthreads() since the write
}

TEST_F(CudaEmuRacecheck, AMissingSyncthreadsIsReported) {
  EXPECT_DEATH(run_or_die([] {
                 DeviceBuffer<int> out(64);
                 neighbour_without_barrier_kernel<<<1, 64>>>(out.get());
                 cudaDeviceSynchronize();
               }),
               "racecheck: __shared__ (read|write) of size 4 bytes at 0x[0-9a-f]+ in "
               "[^\n]*neighbour_without_barrier_kernel[^\n]* at emu_racecheck_test\\.cu:[0-9]+ "
               "races with the earlier (read|write)");
}

__global__ void increment_before_a_barrier_kernel(int* out) {
  __shared__ int count;
  if (threadIdx.x == 0) count = 0;
  __syncthreads();
  count++;  // every thread: a race, though a barrier follows
  __syncthreads();
  if (threadIdx.x == 0) out[0] = count;
}

TEST_F(CudaEmuRacecheck, AnIncrementFollowedByABarrierIsReported) {
  EXPECT_DEATH(run_or_die([] {
                 DeviceBuffer<int> out(1);
                 increment_before_a_barrier_kernel<<<1, 64>>>(out.get());
               }),
               "racecheck: .*increment_before_a_barrier_kernel.* by thread \\([0-9]+,0,0\\) of "
               "the same block, with no __syncthreads\\(\\) between them");
}

__global__ void warp_steps_without_syncwarp_kernel(int* out) {
  __shared__ int s[32];
  const unsigned t = threadIdx.x;
  s[t] = int(t);
  __syncwarp();
  if (t < 16) s[t] += s[t + 16];
  if (t < 8) s[t] += s[t + 8];  // no __syncwarp() between the steps
  if (t == 0) out[0] = s[0];
}

TEST_F(CudaEmuRacecheck, WarpStepsWithoutSyncwarpAreReported) {
  EXPECT_DEATH(run_or_die([] {
                 DeviceBuffer<int> out(1);
                 warp_steps_without_syncwarp_kernel<<<1, 32>>>(out.get());
               }),
               "racecheck: .*warp_steps_without_syncwarp_kernel.* and no __syncwarp\\(\\) "
               "\\(same warp\\)");
}

__global__ void plain_sum_kernel(int* total) { *total += 1; }

TEST_F(CudaEmuRacecheck, APlainSumAcrossBlocksIsReported) {
  // One thread per block: only blocks race, so the report names another block.
  EXPECT_DEATH(run_or_die([] {
                 DeviceBuffer<int> total(std::vector<int>{0});
                 plain_sum_kernel<<<8, 1>>>(total.get());
               }),
               "racecheck: __global__ (read|write) of size 4 bytes .*plain_sum_kernel.* by block "
               "\\([0-9],0,0\\) thread \\(0,0,0\\) of the same grid");
}

// ---- copies and memsets on another stream (race_streams.cpp): no stream delay is set, so the
// copy has long finished when the kernel runs; the report comes from the calls' order alone.

__global__ void scale_by_two_kernel(float* out, const float* in, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = 2.f * in[i];
}

enum class Fill { Copy, Memset };
enum class Order { None, EventWait, HostWaits, SameStream };

// `staged` is filled on one stream (a device-to-device copy of ones, or a memset of zeros), then
// a kernel on a second stream reads it, ordered after the fill by `order` or not at all. Returns
// out[0] (2 after the copy, 0 after the memset) when the device reports nothing.
float fill_then_scale(Fill fill, Order order) {
  const int n = 1000;  // not a multiple of the block: the last block's tail
  DeviceBuffer<float> ones(std::vector<float>(n, 1.f)), staged(n), out(n);
  cudaStream_t copy, compute;
  cudaEvent_t filled;
  cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
  cudaEventCreateWithFlags(&filled, cudaEventDisableTiming);
  if (order == Order::SameStream) compute = copy;
  if (fill == Fill::Copy)
    cudaMemcpyAsync(staged.get(), ones.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, copy);
  else
    cudaMemsetAsync(staged.get(), 0, n * sizeof(float), copy);
  cudaEventRecord(filled, copy);
  if (order == Order::EventWait) cudaStreamWaitEvent(compute, filled, 0);
  if (order == Order::HostWaits) cudaEventSynchronize(filled);
  scale_by_two_kernel<<<(n + 255) / 256, 256, 0, compute>>>(out.get(), staged.get(), n);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(e));
    std::abort();
  }
  cudaEventDestroy(filled);
  cudaStreamDestroy(copy);
  if (order != Order::SameStream) cudaStreamDestroy(compute);
  return out.to_host()[0];
}

TEST_F(CudaEmuRacecheck, AKernelReadingACopyOnAnotherStreamWithoutAnEventIsReported) {
  EXPECT_DEATH(fill_then_scale(Fill::Copy, Order::None),
               "racecheck: __global__ read of size 4 bytes at 0x[0-9a-f]+ in "
               "[^\n]*scale_by_two_kernel[^\n]* at emu_racecheck_test\\.cu:[0-9]+ races with the "
               "cudaMemcpyAsync of 4000 bytes queued in [^\n]*fill_then_scale[^\n]* at "
               "emu_racecheck_test\\.cu:[0-9]+ on another stream, which writes this memory "
               "\\(byte [0-9]+ of the 4000-byte allocation");
}

TEST_F(CudaEmuRacecheck, AKernelReadingAMemsetOnAnotherStreamWithoutAnEventIsReported) {
  EXPECT_DEATH(fill_then_scale(Fill::Memset, Order::None),
               "scale_by_two_kernel[^\n]* races with the cudaMemsetAsync of 4000 bytes queued in "
               "[^\n]*emu_racecheck_test\\.cu:[0-9]+ on another stream, which sets this memory");
}

// The clean twins: the same code with cudaStreamWaitEvent, with the host waiting for the event,
// and with both on one stream.
TEST_F(CudaEmuRacecheck, CopiesAndMemsetsOrderedBeforeTheKernelAreNotReported) {
  for (Order order : {Order::EventWait, Order::HostWaits, Order::SameStream}) {
    EXPECT_EQ(fill_then_scale(Fill::Copy, order), 2.f);
    EXPECT_EQ(fill_then_scale(Fill::Memset, order), 0.f);
  }
}

__global__ void overwrite_kernel(float* data, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) data[i] = 3.f;
}

// A kernel writing what a copy on another stream still reads (write after read), and, clean, the
// same kernel writing a buffer the copy does not touch.
void copy_while_overwriting(bool same_buffer) {
  const int n = 1000;
  DeviceBuffer<float> src(std::vector<float>(n, 1.f)), other(n), dst(n);
  cudaStream_t copy, compute;
  cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking);
  cudaMemcpyAsync(dst.get(), src.get(), n * sizeof(float), cudaMemcpyDeviceToDevice, copy);
  overwrite_kernel<<<(n + 255) / 256, 256, 0, compute>>>(same_buffer ? src.get() : other.get(), n);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "kernel failed: %s\n", cudaGetErrorString(e));
    std::abort();
  }
  cudaStreamDestroy(copy);
  cudaStreamDestroy(compute);
}

TEST_F(CudaEmuRacecheck, AKernelWritingWhatACopyOnAnotherStreamReadsIsReported) {
  EXPECT_DEATH(copy_while_overwriting(true),
               "racecheck: __global__ write of size 4 bytes .*overwrite_kernel[^\n]* races with "
               "the cudaMemcpyAsync of 4000 bytes queued in [^\n]* on another stream, which reads "
               "this memory");
}

TEST_F(CudaEmuRacecheck, AKernelOnOtherMemoryThanACopyIsNotReported) {
  copy_while_overwriting(false);
  SUCCEED();
}

// ---- ordered accesses, never reported

__global__ void ordered_kernel(int* out, int* total) {
  __shared__ int s[64];
  __shared__ int bins[4];
  const unsigned t = threadIdx.x;
  if (t < 4) bins[t] = 0;
  s[t] = int(t);
  __syncthreads();
  atomicAdd(&bins[t % 4], s[63 - t]);  // atomics race with nothing
  atomicAdd(total, 1);
  __syncthreads();
  // A warp-synchronous reduction with __syncwarp() between the steps.
  if (t < 32) {
    for (int offset = 16; offset > 0; offset /= 2) {
      const int v = t < unsigned(offset) ? s[t + offset] : 0;
      __syncwarp();
      if (t < unsigned(offset)) s[t] += v;
      __syncwarp();
    }
  }
  __syncthreads();
  if (t == 0) out[blockIdx.x] = s[0] + bins[0] + bins[1] + bins[2] + bins[3];
}

__global__ void read_back_kernel(int* out, int n) {
  for (int i = int(blockIdx.x * blockDim.x + threadIdx.x); i < n; i += int(gridDim.x * blockDim.x))
    out[i] += 1;  // each element by one thread: written by the previous grid, which has ended
}

TEST_F(CudaEmuRacecheck, BarriersSyncwarpAtomicsAndGridEndsOrderAccesses) {
  DeviceBuffer<int> out(4), total(std::vector<int>{0});
  ordered_kernel<<<4, 64>>>(out.get(), total.get());
  read_back_kernel<<<2, 2>>>(out.get(), 4);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // s[0] after the warp reduction: the sum of 0..31; the bins together: the sum of 0..63; then +1.
  const int want = 31 * 32 / 2 + 63 * 64 / 2 + 1;
  for (int b = 0; b < 4; ++b) EXPECT_EQ(out.to_host()[b], want) << "block " << b;
  EXPECT_EQ(total.to_host()[0], 4 * 64);
}

}  // namespace
}  // namespace minitrain::emu_testing
