// Rung 03, smem_tiled: shared-memory blocking.
// Mapping: a 32 x 32 C tile per block of 1024 threads, one element per thread (row = tid / 32,
// col = tid % 32), its sum in one register. Per k step of 32 the block stages 32 x 32 tiles of
// op(A) and op(B) in shared memory, each thread copying one element of each (load_tile).
// Changed from rung 02: operands go global -> shared once and are read 32 times from there.
// Bound: shared-memory bandwidth and instruction issue: every multiply-add still needs a
// shared-memory load of its B operand.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

// One padding column: a transposed operand is written down the tile's columns, and a row stride
// of 33 floats puts those 32 stores in 32 different banks.
constexpr int kSmemTiledLd = SmemTiledTiling::kBlockK + 1;

__global__ void __launch_bounds__(SmemTiledTiling::kThreads) gemm_smem_tiled_kernel(GemmArgs g) {
  using T = SmemTiledTiling;
  static_assert(T::kBlockM == T::kBlockK && T::kBlockN == T::kBlockK,
                "square tiles share one stride");
  __shared__ float as[T::kBlockM * kSmemTiledLd];  // op(A) tile [BM][BK]
  __shared__ float bs[T::kBlockK * kSmemTiledLd];  // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  const int lr = T::local_row(tid, 0), lc = T::local_col(tid, 0);
  float acc = 0.f;
  for (int64_t k0 = 0; k0 < g.k; k0 += T::kBlockK) {
    load_tile<T::kBlockM, T::kBlockK, T::kThreads, false>(as, kSmemTiledLd, g.a, row0, k0, tid);
    load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kSmemTiledLd, g.b, k0, col0, tid);
    __syncthreads();  // the tiles are complete
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q)
      acc += as[lr * kSmemTiledLd + q] * bs[q * kSmemTiledLd + lc];
    __syncthreads();  // everyone is done reading before the next tiles overwrite them
  }
  // Threads outside C still took part in the loads and barriers above; only the store is guarded.
  if (in_c(row0 + lr, col0 + lc, g.m, g.n))
    store_c(g.c, g.n, row0 + lr, col0 + lc, acc, g.alpha, g.beta);
}

void gemm_smem_tiled_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<SmemTiledTiling>(g, "smem_tiled");
  gemm_smem_tiled_kernel<<<grid, SmemTiledTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
