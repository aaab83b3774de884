#pragma once
// The last pass of the losses' deterministic mean/sum on the GPU (pointwise_loss.cu,
// cross_entropy.cu): one block folds the doubles that the first pass left, one per block or per
// row, in an order fixed by their count alone (thread t takes t, t + kBlock, ...; then
// block_reduce), and divides once. No atomics: the same partials give the same bits every run.

#include "kernels/block_reduce.cuh"
#include "kernels/reduce.h"

namespace minitrain {

/// out[0] = sum(partials[0..count)) / divisor. Launch as <<<1, kBlock>>>.
template <typename T>
__global__ void loss_sum_partials_kernel(T* out, const double* partials, int64_t count,
                                         double divisor) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc += partials[i];
  acc = block_reduce<reduce_detail::SumOf>(acc);
  if (threadIdx.x == 0) out[0] = static_cast<T>(acc / divisor);
}

template <typename T>
void launch_loss_sum_partials(T* out, const double* partials, int64_t count, double divisor,
                              cudaStream_t stream) {
  loss_sum_partials_kernel<T><<<1, kBlock, 0, stream>>>(out, partials, count, divisor);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
