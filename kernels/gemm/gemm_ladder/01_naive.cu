// Rung 01, naive: the baseline every later rung improves on.
// Mapping: one thread per C element; a block of 256 threads owns a 16 x 16 C tile and consecutive
// threads take consecutive ROWS of it (row = tid % 16, col = tid / 16, written out in the kernel
// below). Every operand value comes from global memory once per multiply-add, through no shared
// memory and one accumulator register.
// Bound: memory transactions. A warp's 32 loads of A (and stores of C) hit 32 different rows, so
// nothing coalesces: a few percent of peak.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(NaiveTiling::kThreads) gemm_naive_kernel(GemmArgs g) {
  using T = NaiveTiling;
  const int tid = static_cast<int>(threadIdx.x);
  // The lesson of this rung: consecutive threads on consecutive rows (the same mapping as the
  // tiling's local_row/local_col, which gemm_tiling_test.cpp checks on the CPU).
  const int64_t row = block_row0<T>(blockIdx.x, blockIdx.y) + tid % T::kBlockM;
  const int64_t col = block_col0<T>(blockIdx.x, blockIdx.y) + tid / T::kBlockM;
  if (!in_c(row, col, g.m, g.n)) return;
  float acc = 0.f;
  for (int64_t q = 0; q < g.k; ++q) acc += g.a.at(row, q) * g.b.at(q, col);
  store_c(g.c, g.n, row, col, acc, g.alpha, g.beta);
}

void gemm_naive_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<NaiveTiling>(g, "naive");
  gemm_naive_kernel<<<grid, NaiveTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
