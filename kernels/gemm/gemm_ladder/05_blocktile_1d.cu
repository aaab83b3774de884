// Rung 05, blocktile_1d: 1-D register blocking.
// Mapping: a 64 x 64 C tile per block of 512 threads; thread tid computes the column strip
// rows (tid / 64) * 8 .. + 7 of column tid % 64, 8 accumulators in registers. Per k step of 8 the
// block stages a 64 x 8 op(A) tile and an 8 x 64 op(B) tile in shared memory.
// Changed from rung 03 (built on smem_tiled; rung 04's double buffering is left out to isolate
// this step): one B value read from shared memory feeds 8 multiply-adds.
// Bound: shared-memory bandwidth (the A column is still re-read per k) and global-load latency,
// which a 64 x 64 tile with BK = 8 only partly hides.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

__global__ void __launch_bounds__(Blocktile1dTiling::kThreads)
    gemm_blocktile_1d_kernel(GemmArgs g) {
  using T = Blocktile1dTiling;
  __shared__ float as[T::kBlockM * T::kBlockK];  // op(A) tile [BM][BK]
  __shared__ float bs[T::kBlockK * T::kBlockN];  // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
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
