// A coalesced float copy, the smallest kernel the emulator's memory checks can cost anything in:
// one global load and one global store per thread, nothing else. bench/emu_hook_cost_bench.cpp
// compiles this file four times (bench/CMakeLists.txt), each copy in its own namespace named by
// MT_EMU_BENCH_VARIANT: as emulated kernels are built (routed), with a call per access, with
// AddressSanitizer's inline check alone, and with no sanitizer at all.

#include <cuda_runtime.h>

#include <cstdint>

namespace mtbench_emu::MT_EMU_BENCH_VARIANT {

constexpr int kCopyBlock = 256;

__global__ void __launch_bounds__(kCopyBlock) copy_kernel(float* y, const float* x, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

void copy_cuda(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n == 0) return;
  const auto blocks = static_cast<unsigned>((n + kCopyBlock - 1) / kCopyBlock);
  copy_kernel<<<blocks, kCopyBlock, 0, stream>>>(y, x, n);
}

}  // namespace mtbench_emu::MT_EMU_BENCH_VARIANT
