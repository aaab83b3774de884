// Rung 02, coalesced: the kernel body of rung 01 unchanged; only the thread-to-element mapping.
// Mapping: one thread per C element; a block of 256 threads owns an 8 x 32 C tile and consecutive
// threads take consecutive COLUMNS (row = tid / 32, col = tid % 32), so a warp covers 32
// consecutive columns of one C row. No shared memory, one accumulator register.
// Changed from rung 01: row and col swap roles in the thread index. B's loads and C's stores
// become one 128-byte transaction per warp and A's load a broadcast.
// Bound: global-memory (L1/L2) bandwidth, as every multiply-add still fetches two operands and
// nothing is reused from on-chip storage.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(CoalescedTiling::kThreads) gemm_coalesced_kernel(GemmArgs g) {
  using T = CoalescedTiling;
  const int tid = static_cast<int>(threadIdx.x);
  // The lesson of this rung: consecutive threads on consecutive columns (the same mapping as the
  // tiling's local_row/local_col, which gemm_tiling_test.cpp checks on the CPU).
  const int64_t row = block_row0<T>(blockIdx.x, blockIdx.y) + tid / T::kBlockN;
  const int64_t col = block_col0<T>(blockIdx.x, blockIdx.y) + tid % T::kBlockN;
  if (!in_c(row, col, g.m, g.n)) return;
  float acc = 0.f;
  for (int64_t q = 0; q < g.k; ++q) acc += g.a.at(row, q) * g.b.at(q, col);
  store_c(g.c, g.n, row, col, acc, g.alpha, g.beta);
}

void gemm_coalesced_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<CoalescedTiling>(g, "coalesced");
  gemm_coalesced_kernel<<<grid, CoalescedTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
