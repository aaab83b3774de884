#pragma once
// The fold of one value per thread over a block of kBlock threads, shared by the reductions
// (reduce.cu) and the MSE loss (mse_loss.cu): each warp folds its 32 values with shuffles in a
// fixed tree order, lane 0 of each warp parks its result in shared memory, and warp 0 folds those.
// The order depends on nothing but the thread index, so results are bit-identical run to run.
//
// `Op` has static identity() and combine(a, b) (kernels/reduce.h's reduce_detail::SumOf and
// friends). Every thread of the block must call it, at most once per kernel: a second call would
// need a __syncthreads() before reusing the shared slots.

#include "kernels/cuda_launch.cuh"

namespace minitrain {

inline constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp,
              "block_reduce assumes whole warps and at most 32 of them");

// The fold of `v` over the block, valid in thread 0 only. Needs blockDim.x == kBlock.
template <typename Op>
__device__ double block_reduce(double v) {
  __shared__ double warp_results[kBlock / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = Op::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kBlock / kWarp ? warp_results[lane] : Op::identity();
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      v = Op::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}

}  // namespace minitrain
