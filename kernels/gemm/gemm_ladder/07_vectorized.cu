// Rung 07, vectorized: rung 06's geometry (the same 8 x 8 thread tiles of a 128 x 128 C tile).
// Mapping: as rung 06; op(A) is stored k-major (transposed) in shared memory so that each thread
// reads its 8 A values and 8 B values per k step as two float4 each.
// Changed from rung 06: 16-byte (float4) global loads and k-major A: fewer load instructions and
// no strided shared reads. Rows that do not start on 16-byte boundaries (ld not a multiple of 4,
// or a misaligned pointer) take the scalar loads instead.
// Bound: instruction issue and global-load latency.

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

// Rows of 132 floats: still 16-byte aligned for float4, and a column-wise store of the transposed
// tile (4 floats from one global row to 4 shared rows) spreads over banks instead of piling up.
constexpr int kVecLdA = VectorizedTiling::kBlockM + 4;
constexpr int kVecLdB = VectorizedTiling::kBlockN + 4;

__global__ void __launch_bounds__(VectorizedTiling::kThreads) gemm_vectorized_kernel(GemmArgs g) {
  using T = VectorizedTiling;
  static_assert(T::kTM % 4 == 0 && T::kTN % 4 == 0, "thread tiles are read as float4");
  __shared__ __align__(16) float as_t[T::kBlockK * kVecLdA];  // op(A) tile transposed: [BK][BM]
  __shared__ __align__(16) float bs[T::kBlockK * kVecLdB];    // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  const int lr = T::local_row(tid, 0), lc = T::local_col(tid, 0);  // the thread tile's corner
  float acc[T::kTM][T::kTN] = {};
  float a_frag[T::kTM], b_frag[T::kTN];
  for (int64_t k0 = 0; k0 < g.k; k0 += T::kBlockK) {
    if (g.vec_a)
      load_tile_vec4<T::kBlockM, T::kBlockK, T::kThreads, true>(as_t, kVecLdA, g.a, row0, k0, tid);
    else
      load_tile<T::kBlockM, T::kBlockK, T::kThreads, true>(as_t, kVecLdA, g.a, row0, k0, tid);
    if (g.vec_b)
      load_tile_vec4<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kVecLdB, g.b, k0, col0, tid);
    else
      load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kVecLdB, g.b, k0, col0, tid);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q) {
#pragma unroll
      for (int i = 0; i < T::kTM; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&as_t[q * kVecLdA + lr + i]);
        a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < T::kTN; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&bs[q * kVecLdB + lc + j]);
        b_frag[j] = v.x, b_frag[j + 1] = v.y, b_frag[j + 2] = v.z, b_frag[j + 3] = v.w;
      }
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

void gemm_vectorized_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<VectorizedTiling>(g, "vectorized");
  gemm_vectorized_kernel<<<grid, VectorizedTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
