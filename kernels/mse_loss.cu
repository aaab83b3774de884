// MSE loss on the GPU. The elementwise parts are grid-stride loops; mean/sum is a deterministic
// two-pass reduction: pass 1 gives each of at most kMseReduceBlocks blocks a grid-stride share,
// reduced in registers, then across the warp with shuffles and across warps in shared memory, to
// one double per block; pass 2 (one block) reduces those partials in a fixed order. No atomics,
// so the same input gives the same bits every run. Memory-bound: pass 1 reads each input once;
// pass 2 touches 8 KiB.

#include "kernels/cuda_launch.cuh"
#include "kernels/mse_loss.h"

namespace minitrain {

namespace {
constexpr int kWarp = 32;
static_assert(kBlock % kWarp == 0 && kBlock / kWarp <= kWarp,
              "block_sum assumes whole warps and at most 32 of them");

// The sum of `v` over the block, valid in thread 0. Every thread of the block must call it, once
// per kernel (a second call would need a __syncthreads() before reusing warp_sums).
__device__ double block_sum(double v) {
  __shared__ double warp_sums[kBlock / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  // step 1: each warp folds its 32 values into lane 0 (tree order: fixed, hence deterministic)
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xffffffffu, v, offset);
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  // step 2: warp 0 folds the per-warp sums
  if (warp == 0) {
    v = lane < int(blockDim.x) / kWarp ? warp_sums[lane] : 0.0;
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      v += __shfl_down_sync(0xffffffffu, v, offset);
  }
  return v;
}
}  // namespace

// ---- CUDA kernels ----

// Pass 1: partials[blockIdx.x] = sum of (pred - target)^2 over this block's grid-stride share.
template <typename T>
__global__ void mse_loss_partial_sums_kernel(double* partials, const T* pred, const T* target,
                                             int64_t n) {
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const double d = double(pred[i]) - double(target[i]);
    acc += d * d;
  }
  acc = block_sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Pass 2 (one block): out[0] = sum(partials) / divisor.
template <typename T>
__global__ void mse_loss_finish_kernel(T* out, const double* partials, int num_partials,
                                       double divisor) {
  double acc = 0;
  for (int i = threadIdx.x; i < num_partials; i += blockDim.x) acc += partials[i];
  acc = block_sum(acc);
  if (threadIdx.x == 0) out[0] = static_cast<T>(acc / divisor);
}

template <typename T>
__global__ void mse_loss_elementwise_kernel(T* out, const T* pred, const T* target, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T d = pred[i] - target[i];
    out[i] = d * d;
  }
}

template <typename T>
__global__ void mse_loss_backward_kernel(T* grad_pred, const T* grad_out, const T* pred,
                                         const T* target, int64_t n, T norm, bool per_element) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    grad_pred[i] = norm * (pred[i] - target[i]) * grad_out[per_element ? i : 0];
}

// ---- launchers ----

template <typename T>
void mse_loss_reduce_cuda(T* out, const T* pred, const T* target, int64_t n, double divisor,
                          double* workspace, CUstream_st* stream) {
  // The grid depends only on n, so the summation order (and the result) is fixed for a given n.
  const int blocks = static_cast<int>(
      std::min<int64_t>(kMseReduceBlocks, std::max<int64_t>(1, (n + kBlock - 1) / kBlock)));
  mse_loss_partial_sums_kernel<T>
      <<<blocks, kBlock, 0, as_cuda(stream)>>>(workspace, pred, target, n);
  CHECK_CUDA_LAUNCH();
  mse_loss_finish_kernel<T><<<1, kBlock, 0, as_cuda(stream)>>>(out, workspace, blocks, divisor);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void mse_loss_elementwise_cuda(T* out, const T* pred, const T* target, int64_t n,
                               CUstream_st* stream) {
  if (n == 0) return;
  mse_loss_elementwise_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, pred, target, n);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void mse_loss_backward_cuda(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                            int64_t n, T norm, bool per_element, CUstream_st* stream) {
  if (n == 0) return;
  mse_loss_backward_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(
      grad_pred, grad_out, pred, target, n, norm, per_element);
  CHECK_CUDA_LAUNCH();
}

#define MT_INSTANTIATE_MSE_CUDA(T)                                                            \
  template void mse_loss_reduce_cuda<T>(T*, const T*, const T*, int64_t, double, double*,     \
                                        CUstream_st*);                                        \
  template void mse_loss_elementwise_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);  \
  template void mse_loss_backward_cuda<T>(T*, const T*, const T*, const T*, int64_t, T, bool, \
                                          CUstream_st*);
MT_INSTANTIATE_MSE_CUDA(float)
MT_INSTANTIATE_MSE_CUDA(double)
#undef MT_INSTANTIATE_MSE_CUDA

}  // namespace minitrain
