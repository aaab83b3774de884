#pragma once
// Pass 1 of the two-pass reductions, as device functions: one thread's grid-stride fold of its
// slice in double (16-byte packs when the input is aligned, then the scalar tail), and the block's
// fold of those (kernels/block_reduce.cuh). Shared by reduce.cu's one-tensor kernel and
// multi_tensor_norm.cu's many-tensor one, so a tensor's partials are the same bits whichever
// kernel made them: the same code, the same (thread, stride) partition.

#include <cstdint>

#include "kernels/block_reduce.cuh"
#include "kernels/vectorized.cuh"

namespace minitrain {

/// The fold of x[i] for i = tid, tid + stride, ... (packs of Pack<T>::kSize first when `vec`,
/// which must be uniform over the blocks of one tensor), from Op::identity().
template <typename T, typename Op>
__device__ __forceinline__ double thread_fold(const T* x, int64_t n, bool vec, int64_t tid,
                                              int64_t stride) {
  constexpr int W = Pack<T>::kSize;
  double acc = Op::identity();
  int64_t scalar_begin = 0;
  if (vec) {
    for (int64_t p = tid; p < n / W; p += stride) {
      const Pack<T> v = load_pack(x + p * W);
#pragma unroll
      for (int j = 0; j < W; ++j) acc = Op::combine(acc, Op::map(static_cast<double>(v.v[j])));
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride)
    acc = Op::combine(acc, Op::map(static_cast<double>(x[i])));
  return acc;
}

/// Block `block` of a pass 1 of `blocks` blocks over x (blockDim.x == kBlock): its partial, valid
/// in thread 0. Every thread of the block must call it (block_reduce's rule: once per kernel, or
/// a __syncthreads() before the next call).
template <typename T, typename Op>
__device__ __forceinline__ double block_partial(const T* x, int64_t n, bool vec, int64_t block,
                                                int64_t blocks) {
  const int64_t tid = block * blockDim.x + threadIdx.x;
  const int64_t stride = blocks * blockDim.x;
  return block_reduce<Op>(thread_fold<T, Op>(x, n, vec, tid, stride));
}

}  // namespace minitrain
