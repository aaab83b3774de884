// Naive SGEMM: one thread per C element, consecutive threads on consecutive ROWS of C. Every
// operand value comes from global memory once per multiply-add, and a warp's 32 loads of A (and
// stores of C) hit 32 different rows: bound by memory transactions, a few percent of peak.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(NaiveTiling::kThreads) gemm_naive_kernel(GemmArgs g) {
  using T = NaiveTiling;
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row = block_row0<T>(blockIdx.x, blockIdx.y) + T::local_row(tid, 0);
  const int64_t col = block_col0<T>(blockIdx.x, blockIdx.y) + T::local_col(tid, 0);
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
