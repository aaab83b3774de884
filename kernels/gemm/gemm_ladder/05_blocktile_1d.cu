// 1-D register blocking: each thread computes a column strip of TM = 8 C values, so one B value
// read from shared memory feeds 8 multiply-adds held in registers. Fewer shared-memory loads per
// FLOP than smem_tiled; bound by shared-memory bandwidth (the A column is still re-read per k) and
// by global-load latency, which a 64 x 64 tile with BK = 8 only partly hides.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(Blocktile1dTiling::kThreads) gemm_blocktile_1d_kernel(GemmArgs g) {
  using T = Blocktile1dTiling;
  __shared__ float as[T::kBlockM * T::kBlockK];  // op(A) tile [BM][BK]
  __shared__ float bs[T::kBlockK * T::kBlockN];  // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y), col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  const int lc = T::local_col(tid, 0);
  float acc[T::kTM] = {};
  for (int64_t k0 = 0; k0 < g.k; k0 += T::kBlockK) {
    load_tile<T::kBlockM, T::kBlockK, T::kThreads, false>(as, T::kBlockK, g.a, row0, k0, tid);
    load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, T::kBlockN, g.b, k0, col0, tid);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q) {
      const float b = bs[q * T::kBlockN + lc];  // reused by the TM results below
#pragma unroll
      for (int i = 0; i < T::kTM; ++i) acc[i] += as[T::local_row(tid, i) * T::kBlockK + q] * b;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < T::kTM; ++i) {
    const int64_t row = row0 + T::local_row(tid, i), col = col0 + lc;
    if (in_c(row, col, g.m, g.n)) store_c(g.c, g.n, row, col, acc[i], g.alpha, g.beta);
  }
}

void gemm_blocktile_1d_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<Blocktile1dTiling>(g, "blocktile_1d");
  gemm_blocktile_1d_kernel<<<grid, Blocktile1dTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
