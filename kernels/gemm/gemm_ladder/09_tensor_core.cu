// Rungs 09 and 10, tc_tf32 and tc_bf16: tensor cores through WMMA (nvcuda::wmma).
// Mapping: rung 08's block and warp tiles (128 x 128, warps of 64 x 32), each warp tile held as
// 4 x 2 WMMA 16 x 16 FP32 accumulator fragments; the epilogue stages one fragment at a time
// through shared memory (TensorCoreTiling in gemm_tiling.h).
// Changed from rung 08: a warp multiplies 16 x 16 fragments in one instruction sequence
// (mma.sync underneath), TF32 inputs (16x16x8) or BF16 inputs (16x16x16), FP32 accumulate.
// Operands are rounded once when staged in shared memory.
// Bound: feeding the tensor cores: global-load latency and shared-memory bandwidth (no cp.async
// pipelining here). Hopper's wgmma would need sm_90a, which is not in this build's architecture
// list (80;90), so the same mma.sync path runs on sm_80 and sm_90.

#include <cuda_bf16.h>
#include <mma.h>

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"
#include "kernels/gemm/gemm_ladder/gemm_tile_load.cuh"

namespace minitrain::gemm_ladder {

namespace wmma = nvcuda::wmma;

// The two input precisions: fragment element type, shared-memory type, fragment depth, rounding.
// Shared rows are padded by 32 bytes: wmma::load_matrix_sync wants 32-byte aligned fragment
// pointers and ld a multiple of 16 bytes, and the pad shifts successive rows across banks.
struct Tf32Inputs {
  using Frag = wmma::precision::tf32;
  using Smem = float;
  static constexpr int kK = 8, kPad = 8;
  struct Round {
    __device__ __forceinline__ float operator()(float v) const { return wmma::__float_to_tf32(v); }
  };
};
struct Bf16Inputs {
  using Frag = __nv_bfloat16;
  using Smem = __nv_bfloat16;
  static constexpr int kK = 16, kPad = 16;
  struct Round {
    __device__ __forceinline__ __nv_bfloat16 operator()(float v) const {
      return __float2bfloat16(v);
    }
  };
};

template <class P>
__global__ void __launch_bounds__(TensorCoreTiling::kThreads) gemm_tensor_core_kernel(GemmArgs g) {
  using T = TensorCoreTiling;
  using S = typename P::Smem;
  constexpr int kLdA = T::kBlockK + P::kPad, kLdB = T::kBlockN + P::kPad;
  constexpr int kWarps = T::kThreads / 32;
  static_assert(T::kBlockK % P::kK == 0, "the block's k depth is whole fragments");
  __shared__ __align__(128) S as[T::kBlockM * kLdA];  // op(A) tile [BM][BK], rounded
  __shared__ __align__(128) S bs[T::kBlockK * kLdB];  // op(B) tile [BK][BN], rounded
  __shared__ __align__(
      128) float cs[kWarps][T::kFrag * T::kFrag];  // one fragment per warp, for the epilogue

  const int tid = static_cast<int>(threadIdx.x), warp = tid / 32, lane = tid % 32;
  const int warp_row = (warp / T::kWarpsN) * T::kWarpM, warp_col = (warp % T::kWarpsN) * T::kWarpN;
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);

  wmma::fragment<wmma::accumulator, T::kFrag, T::kFrag, P::kK, float> acc[T::kFragM][T::kFragN];
#pragma unroll
  for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < T::kFragN; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  for (int64_t k0 = 0; k0 < g.k; k0 += T::kBlockK) {
    load_tile<T::kBlockM, T::kBlockK, T::kThreads, false>(as, kLdA, g.a, row0, k0, tid,
                                                          typename P::Round());
    load_tile<T::kBlockK, T::kBlockN, T::kThreads, false>(bs, kLdB, g.b, k0, col0, tid,
                                                          typename P::Round());
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < T::kBlockK; kk += P::kK) {
      wmma::fragment<wmma::matrix_a, T::kFrag, T::kFrag, P::kK, typename P::Frag, wmma::row_major>
          a_frag[T::kFragM];
      wmma::fragment<wmma::matrix_b, T::kFrag, T::kFrag, P::kK, typename P::Frag, wmma::row_major>
          b_frag[T::kFragN];
#pragma unroll
      for (int i = 0; i < T::kFragM; ++i)
        wmma::load_matrix_sync(a_frag[i], as + (warp_row + i * T::kFrag) * kLdA + kk, kLdA);
#pragma unroll
      for (int j = 0; j < T::kFragN; ++j)
        wmma::load_matrix_sync(b_frag[j], bs + kk * kLdB + warp_col + j * T::kFrag, kLdB);
#pragma unroll
      for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
        for (int j = 0; j < T::kFragN; ++j)
          wmma::mma_sync(acc[i][j], a_frag[i], b_frag[j], acc[i][j]);
    }
    __syncthreads();
  }

  // Epilogue: a fragment's element layout is opaque, so each one goes through the warp's staging
  // tile, from where the lanes apply alpha/beta and store with bounds checks (tiles hang over C).
#pragma unroll
  for (int i = 0; i < T::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < T::kFragN; ++j) {
      wmma::store_matrix_sync(cs[warp], acc[i][j], T::kFrag, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < T::kRowsPerLanePerFrag; ++e) {
        const int64_t row = row0 + T::local_row(tid, i * T::kRowsPerLanePerFrag + e);
        const int64_t col = col0 + T::local_col(tid, j);
        if (in_c(row, col, g.m, g.n))
          store_c(g.c, g.n, row, col, cs[warp][T::frag_row(lane, e) * T::kFrag + T::frag_col(lane)],
                  g.alpha, g.beta);
      }
      __syncwarp();  // all lanes have read the staging tile before the next fragment lands
    }
}

void gemm_tc_tf32_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<TensorCoreTiling>(g, "tc_tf32");
  gemm_tensor_core_kernel<Tf32Inputs><<<grid, TensorCoreTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

void gemm_tc_bf16_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<TensorCoreTiling>(g, "tc_bf16");
  gemm_tensor_core_kernel<Bf16Inputs><<<grid, TensorCoreTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
