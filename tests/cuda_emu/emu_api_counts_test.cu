// The runtime-call counts of cuda_emu/api_counts.h: each call counted once, and a blocking call
// made inside another (cudaMemcpy's own stream synchronize) not counted again.

#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "cuda_emu/api_counts.h"
#include "emu_test_util.h"

namespace minitrain::emu_testing {
namespace {

__global__ void add_one_kernel(float* x, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) x[i] += 1.0f;
}

TEST(CudaEmuApiCounts, CountsEachCallOnceAndNestedSyncsNotAgain) {
  constexpr int kN = 100;
  float* d = nullptr;
  EMU_OK(cudaSetDevice(0));
  mtemu::api_counts_reset();
  EMU_OK(cudaMalloc(reinterpret_cast<void**>(&d), kN * sizeof(float)));
  EMU_OK(cudaMemsetAsync(d, 0, kN * sizeof(float), nullptr));
  add_one_kernel<<<2, 64>>>(d, kN);
  add_one_kernel<<<2, 64>>>(d, kN);
  EMU_OK(cudaGetLastError());
  std::vector<float> host(kN, -1.0f), pinned_copy(kN);
  // One blocking call, one device-to-host copy: cudaMemcpy's stream synchronize is its own.
  EMU_OK(cudaMemcpy(host.data(), d, kN * sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(host[0], 2.0f);
  float* pinned = nullptr;
  EMU_OK(cudaMallocHost(reinterpret_cast<void**>(&pinned), kN * sizeof(float)));
  // Into pinned memory a copy stays asynchronous: a copy, no sync until the event's.
  EMU_OK(cudaMemcpyAsync(pinned, d, kN * sizeof(float), cudaMemcpyDeviceToHost, nullptr));
  cudaEvent_t done;
  EMU_OK(cudaEventCreate(&done));
  EMU_OK(cudaEventRecord(done, nullptr));
  EMU_OK(cudaEventSynchronize(done));
  EXPECT_EQ(pinned[kN - 1], 2.0f);
  // Into pageable memory CUDA completes the copy before returning: a sync by itself.
  EMU_OK(cudaMemcpyAsync(host.data(), d, kN * sizeof(float), cudaMemcpyDeviceToHost, nullptr));
  EMU_OK(cudaStreamSynchronize(nullptr));
  EMU_OK(cudaDeviceSynchronize());
  // Host to device: neither a device-to-host copy nor (from pinned memory) a sync.
  EMU_OK(cudaMemcpyAsync(d, pinned, kN * sizeof(float), cudaMemcpyHostToDevice, nullptr));
  const mtemu::ApiCounts mine = mtemu::api_counts_of_this_thread();
  std::thread other([] {
    EMU_OK(cudaSetDevice(0));
    EMU_OK(cudaDeviceSynchronize());
  });
  other.join();
  EMU_OK(cudaFree(d));
  EMU_OK(cudaFreeHost(pinned));
  EMU_OK(cudaEventDestroy(done));

  const mtemu::ApiCounts all = mtemu::api_counts();
  EXPECT_EQ(all.launches, 2u);
  EXPECT_EQ(all.memsets, 1u);
  EXPECT_EQ(all.device_to_host_copies, 3u);
  // cudaMemcpy, cudaEventSynchronize, the pageable copy, cudaStreamSynchronize,
  // cudaDeviceSynchronize here; the other thread's cudaDeviceSynchronize.
  EXPECT_EQ(all.host_syncs, 6u);
  EXPECT_EQ(mine.host_syncs, 5u);
  EXPECT_EQ(all.mallocs, 1u);  // cudaMallocHost is not device memory
  EXPECT_EQ(all.frees, 1u);
  mtemu::api_counts_reset();
  EXPECT_EQ(mtemu::api_counts().launches, 0u);
  EXPECT_EQ(mtemu::api_counts_of_this_thread().host_syncs, 0u);
}

}  // namespace
}  // namespace minitrain::emu_testing
