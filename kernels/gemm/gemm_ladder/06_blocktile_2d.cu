// Rung 06, blocktile_2d: 2-D register blocking.
// Mapping: a 128 x 128 C tile per block of 256 threads; thread tid computes the 8 x 8 register tile
// at rows (tid / 16) * 8 .., columns (tid % 16) * 8 .. as a sum of outer products. Per k step of
// 8 the block stages 128 x 8 of op(A) and 8 x 128 of op(B) in shared memory.
// Changed from rung 05: per k step 8 + 8 shared-memory loads feed 64 multiply-adds.
// Bound: shared-memory bank conflicts on the strided A reads and the scalar global loads, which
// the vectorized rung removes.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(Blocktile2dTiling::kThreads)
    gemm_blocktile_2d_kernel(GemmArgs g) {
  using T = Blocktile2dTiling;
  __shared__ float as[T::kBlockM * T::kBlockK];  // op(A) tile [BM][BK]
  __shared__ float bs[T::kBlockK * T::kBlockN];  // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  float acc[T::kTM][T::kTN] = {};
  float a_frag[T::kTM], b_frag[T::kTN];
  for (int64_t k0 = 0; k0 < g.k; k0 += T::kBlockK) {
    load_tile<T::kBlockM, T::kBlockK, T::kThreads, false>(as, T::kBlockK, g.a, row0, k0, tid);
    load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, T::kBlockN, g.b, k0, col0, tid);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q) {
#pragma unroll
      for (int i = 0; i < T::kTM; ++i) a_frag[i] = as[T::local_row(tid, i) * T::kBlockK + q];
#pragma unroll
      for (int j = 0; j < T::kTN; ++j) b_frag[j] = bs[q * T::kBlockN + T::local_col(tid, j)];
#pragma unroll
      for (int i = 0; i < T::kTM; ++i)
#pragma unroll
        for (int j = 0; j < T::kTN; ++j) acc[i][j] += a_frag[i] * b_frag[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < T::kTM; ++i)
#pragma unroll
    for (int j = 0; j < T::kTN; ++j) {
      const int64_t row = row0 + T::local_row(tid, i), col = col0 + T::local_col(tid, j);
      if (in_c(row, col, g.m, g.n)) store_c(g.c, g.n, row, col, acc[i][j], g.alpha, g.beta);
    }
}

void gemm_blocktile_2d_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<Blocktile2dTiling>(g, "blocktile_2d");
  gemm_blocktile_2d_kernel<<<grid, Blocktile2dTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
