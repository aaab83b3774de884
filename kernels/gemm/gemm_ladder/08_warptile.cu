// Rung 08, warptile: warp tiling.
// Mapping: a 128 x 128 C tile per block of 256 threads split into 2 x 4 warp tiles of 64 x 32;
// each warp sweeps its tile in two 64 x 16 sub-tiles, lane l owning the 8 x 4 thread tile at
// rows (l / 4) * 8 .., columns (l % 4) * 4 .. of each (WarptileTiling in gemm_tiling.h).
// Changed from rung 07: a warp's shared-memory reads touch only its own rows and columns (4
// distinct B float4s, 8 distinct A pairs: broadcast, no conflicts), and the schedule mirrors the
// tensor-core hierarchy.
// Bound: FP32 issue rate and, at small sizes, the number of blocks (wave quantisation).

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_mixed.h"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

constexpr int kWarpLdA = WarptileTiling::kBlockM + 4;  // see gemm_vectorized.cu on the padding
constexpr int kWarpLdB = WarptileTiling::kBlockN + 4;

// The block's tile of C: the float32 kernel and the mixed one (16-bit operands read widened, a
// 16-bit C rounded at the store) run this one body, so each C element is the same sum in the same
// order; only the loads and the store differ (`load_a`, `load_b`, `store`).
template <typename LoadA, typename LoadB, typename Store>
__device__ __forceinline__ void warptile_block(int64_t k, LoadA load_a, LoadB load_b, Store store) {
  using T = WarptileTiling;
  static_assert(T::kTM % 4 == 0 && T::kTN % 4 == 0, "thread tiles are read as float4");
  __shared__ __align__(16) float as_t[T::kBlockK * kWarpLdA];  // op(A) tile transposed: [BK][BM]
  __shared__ __align__(16) float bs[T::kBlockK * kWarpLdB];    // op(B) tile [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  float acc[T::kRowsPerThread][T::kColsPerThread] = {};
  float a_frag[T::kRowsPerThread], b_frag[T::kColsPerThread];
  for (int64_t k0 = 0; k0 < k; k0 += T::kBlockK) {
    load_a(as_t, row0, k0, tid);
    load_b(bs, k0, col0, tid);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q) {
      // Each sub-tile's TM (TN) values are contiguous in shared memory: float4 reads.
#pragma unroll
      for (int i = 0; i < T::kRowsPerThread; i += 4) {
        const float4 v =
            *reinterpret_cast<const float4*>(&as_t[q * kWarpLdA + T::local_row(tid, i)]);
        a_frag[i] = v.x, a_frag[i + 1] = v.y, a_frag[i + 2] = v.z, a_frag[i + 3] = v.w;
      }
#pragma unroll
      for (int j = 0; j < T::kColsPerThread; j += 4) {
        const float4 v = *reinterpret_cast<const float4*>(&bs[q * kWarpLdB + T::local_col(tid, j)]);
        b_frag[j] = v.x, b_frag[j + 1] = v.y, b_frag[j + 2] = v.z, b_frag[j + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < T::kRowsPerThread; ++i)
#pragma unroll
        for (int j = 0; j < T::kColsPerThread; ++j) acc[i][j] += a_frag[i] * b_frag[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < T::kRowsPerThread; ++i)
#pragma unroll
    for (int j = 0; j < T::kColsPerThread; ++j)
      store(row0 + T::local_row(tid, i), col0 + T::local_col(tid, j), acc[i][j]);
}

// op(A)'s tile into as_t (transposed) and op(B)'s into bs: float4 loads where the rows allow.
template <typename X>
__device__ __forceinline__ void warptile_load_a(float* as_t, const X& a, bool vec, int64_t row0,
                                                int64_t k0, int tid) {
  using T = WarptileTiling;
  if (vec)
    load_tile_vec4<T::kBlockM, T::kBlockK, T::kThreads, true>(as_t, kWarpLdA, float_view(a), row0,
                                                              k0, tid);
  else
    load_tile<T::kBlockM, T::kBlockK, T::kThreads, true>(as_t, kWarpLdA, a, row0, k0, tid);
}
template <typename X>
__device__ __forceinline__ void warptile_load_b(float* bs, const X& b, bool vec, int64_t k0,
                                                int64_t col0, int tid) {
  using T = WarptileTiling;
  if (vec)
    load_tile_vec4<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kWarpLdB, float_view(b), k0,
                                                               col0, tid);
  else
    load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kWarpLdB, b, k0, col0, tid);
}

__global__ void __launch_bounds__(WarptileTiling::kThreads) gemm_warptile_kernel(GemmArgs g) {
  warptile_block(
      g.k,
      [&](float* s, int64_t r0, int64_t c0, int tid) {
        warptile_load_a(s, g.a, g.vec_a, r0, c0, tid);
      },
      [&](float* s, int64_t r0, int64_t c0, int tid) {
        warptile_load_b(s, g.b, g.vec_b, r0, c0, tid);
      },
      [&](int64_t row, int64_t col, float acc) {
        if (in_c(row, col, g.m, g.n)) store_c(g.c, g.n, row, col, acc, g.alpha, g.beta);
      });
}

// Mixed precision (issue 35): 16-bit operands widened as they are copied into shared memory,
// where the float32 kernel copies float32 ones; then the same block; a 16-bit C rounded at the
// store, after the optional bias (gemm_mixed.h's store_c_mixed).
__global__ void __launch_bounds__(WarptileTiling::kThreads)
    gemm_warptile_mixed_kernel(GemmMixedArgs g) {
  warptile_block(
      g.k,
      [&](float* s, int64_t r0, int64_t c0, int tid) {
        warptile_load_a(s, g.a, g.vec_a, r0, c0, tid);
      },
      [&](float* s, int64_t r0, int64_t c0, int tid) {
        warptile_load_b(s, g.b, g.vec_b, r0, c0, tid);
      },
      [&](int64_t row, int64_t col, float acc) {
        if (in_c(row, col, g.m, g.n)) store_c_mixed(g, row, col, acc);
      });
}

void gemm_warptile_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<WarptileTiling>(g, "warptile");
  gemm_warptile_kernel<<<grid, WarptileTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

void gemm_warptile_mixed_cuda(const GemmMixedArgs& g, CUstream_st* stream) {
  GemmArgs shape{};
  shape.m = g.m, shape.n = g.n;
  const dim3 grid = launch_grid<WarptileTiling>(shape, "warptile");
  gemm_warptile_mixed_kernel<<<grid, WarptileTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
