// MSE loss on the GPU. The elementwise parts use the shared vectorized map (16-byte packs when
// aligned); mean/sum is a deterministic two-pass reduction: pass 1 gives each of at most
// kMseReduceBlocks blocks a grid-stride share (in packs when pred and target are aligned),
// reduced in registers, then over the block (kernels/block_reduce.cuh), to one double per block;
// pass 2 (one block, kernels/loss/loss_reduce.cuh as for the other losses) reduces those partials
// in a fixed order. No atomics, so the same input gives the same bits every run. The fused forward
// + backward is pass 1 with the gradient stored on the way: the same code, hence the same summation
// order and loss. Memory-bound: pass 1 reads each input once (and the fused one writes the gradient
// once); pass 2 touches 8 KiB.

#include "kernels/block_reduce.cuh"
#include "kernels/loss/loss_reduce.cuh"
#include "kernels/loss/mse_loss.h"
#include "kernels/reduce.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

namespace {
// One element of pass 1: its square added to acc, and with kGrad its gradient (mse_loss_backward's
// expression with grad_out = 1) returned for storing.
template <typename T>
__device__ __forceinline__ T squared_error_step(double& acc, T p, T t, T norm) {
  const double d = double(p) - double(t);
  acc += d * d;
  return norm * (p - t) * T(1);
}
}  // namespace

// ---- CUDA kernels ----

// Pass 1: partials[blockIdx.x] = sum of (pred - target)^2 over this block's grid-stride share;
// with kGrad also grad[i] = norm * (pred[i] - target[i]). vec: pred and target 16-byte aligned
// (the summation order depends on it and on n only); grad_vec: grad aligned too.
template <bool kGrad, typename T>
__global__ void mse_loss_partial_sums_kernel(double* partials, T* grad, const T* pred,
                                             const T* target, int64_t n, T norm, bool vec,
                                             bool grad_vec) {
  constexpr int W = Pack<T>::kSize;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  double acc = 0;
  int64_t scalar_begin = 0;
  if (vec) {
    for (int64_t p = tid; p < n / W; p += stride) {
      const Pack<T> pv = load_pack(pred + p * W), tv = load_pack(target + p * W);
      Pack<T> g;
#pragma unroll
      for (int j = 0; j < W; ++j) g.v[j] = squared_error_step(acc, pv.v[j], tv.v[j], norm);
      if constexpr (kGrad) {
        if (grad_vec) {
          store_pack(grad + p * W, g);
        } else {
#pragma unroll
          for (int j = 0; j < W; ++j) grad[p * W + j] = g.v[j];
        }
      }
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {
    const T g = squared_error_step(acc, pred[i], target[i], norm);
    if constexpr (kGrad) grad[i] = g;
  }
  acc = block_reduce<reduce_detail::SumOf>(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

namespace {
template <typename T>
struct SquaredError {
  MT_HOST_DEVICE T operator()(T p, T t) const {
    const T d = p - t;
    return d * d;
  }
};
template <typename T>
struct MseGradPerElement {
  T norm;
  MT_HOST_DEVICE T operator()(T g, T p, T t) const { return norm * (p - t) * g; }
};
// The 0-d grad_out is read on the device (no host round trip); it stays in cache.
template <typename T>
struct MseGradScalar {
  T norm;
  const T* grad_out;
  __device__ T operator()(T p, T t) const { return norm * (p - t) * grad_out[0]; }
};
template <bool kGrad, typename T>
void launch_partial_sums(double* workspace, T* grad, const T* pred, const T* target, int64_t n,
                         T norm, int blocks, cudaStream_t stream) {
  mse_loss_partial_sums_kernel<kGrad, T><<<blocks, kBlock, 0, stream>>>(
      workspace, grad, pred, target, n, norm, all_aligned16(pred, target),
      grad != nullptr && is_aligned16(grad));
  CHECK_CUDA_LAUNCH();
}

// The grid depends only on n, so the summation order (and the result) is fixed for a given n.
int reduce_blocks(int64_t n) {
  return static_cast<int>(
      std::min<int64_t>(kMseReduceBlocks, std::max<int64_t>(1, (n + kBlock - 1) / kBlock)));
}
}  // namespace

template <typename T>
__global__ void mse_loss_none_fused_kernel(T* out, T* grad, const T* pred, const T* target,
                                           int64_t n, T norm) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T p = pred[i], t = target[i];
    const T d = p - t;
    out[i] = d * d;
    grad[i] = norm * (p - t) * T(1);
  }
}

// The same in 16-byte packs: two vector loads and two vector stores per 4 floats instead of
// four scalar ones each; the pointers are 16-byte aligned (the launcher checks), the tail of
// n % W elements goes one by one. Memory-bound either way; packs cut the instructions per byte.
template <typename T>
__global__ void mse_loss_none_fused_vec4_kernel(T* __restrict__ out, T* __restrict__ grad,
                                                const T* __restrict__ pred,
                                                const T* __restrict__ target, int64_t n, T norm) {
  constexpr int W = Pack<T>::kSize;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t packs = n / W;
  for (int64_t q = tid; q < packs; q += stride) {
    const Pack<T> pv = load_pack(pred + q * W), tv = load_pack(target + q * W);
    Pack<T> o, g;
#pragma unroll
    for (int j = 0; j < W; ++j) {
      const T d = pv.v[j] - tv.v[j];
      o.v[j] = d * d;
      g.v[j] = norm * (pv.v[j] - tv.v[j]) * T(1);
    }
    store_pack(out + q * W, o);
    store_pack(grad + q * W, g);
  }
  for (int64_t i = packs * W + tid; i < n; i += stride) {
    const T p = pred[i], t = target[i];
    const T d = p - t;
    out[i] = d * d;
    grad[i] = norm * (p - t) * T(1);
  }
}

// ---- launchers ----

template <typename T>
void mse_loss_reduce_cuda(T* out, const T* pred, const T* target, int64_t n, double divisor,
                          double* workspace, CUstream_st* stream) {
  const int blocks = reduce_blocks(n);
  launch_partial_sums<false, T>(workspace, nullptr, pred, target, n, T(0), blocks, as_cuda(stream));
  launch_loss_sum_partials<T>(out, workspace, blocks, divisor, as_cuda(stream));
}

template <typename T>
void mse_loss_forward_backward_cuda(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                    double divisor, T norm, bool per_element, double* workspace,
                                    CUstream_st* stream) {
  if (per_element) {
    // Rare in training (a loss per element); one scalar pass, two writes.
    if (n == 0) return;
    mse_loss_none_fused_kernel<T>
        <<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, grad_pred, pred, target, n, norm);
    CHECK_CUDA_LAUNCH();
    return;
  }
  const int blocks = reduce_blocks(n);
  launch_partial_sums<true, T>(workspace, grad_pred, pred, target, n, norm, blocks,
                               as_cuda(stream));
  launch_loss_sum_partials<T>(out, workspace, blocks, divisor, as_cuda(stream));
}

template <typename T>
void mse_loss_none_fused_vec4_cuda(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                   T norm, CUstream_st* stream) {
  if (n == 0) return;
  if (!all_aligned16(out, grad_pred, pred, target)) {
    mse_loss_none_fused_kernel<T>
        <<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, grad_pred, pred, target, n, norm);
    CHECK_CUDA_LAUNCH();
    return;
  }
  const int64_t work = (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
  mse_loss_none_fused_vec4_kernel<T>
      <<<grid_for(work), kBlock, 0, as_cuda(stream)>>>(out, grad_pred, pred, target, n, norm);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void mse_loss_elementwise_cuda(T* out, const T* pred, const T* target, int64_t n,
                               CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), SquaredError<T>{}, pred, target);
}

template <typename T>
void mse_loss_backward_cuda(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                            int64_t n, T norm, bool per_element, CUstream_st* stream) {
  if (per_element)
    map_cuda(grad_pred, n, as_cuda(stream), MseGradPerElement<T>{norm}, grad_out, pred, target);
  else
    map_cuda(grad_pred, n, as_cuda(stream), MseGradScalar<T>{norm, grad_out}, pred, target);
}

#define MT_INSTANTIATE_MSE_CUDA(T)                                                                \
  template void mse_loss_reduce_cuda<T>(T*, const T*, const T*, int64_t, double, double*,         \
                                        CUstream_st*);                                            \
  template void mse_loss_forward_backward_cuda<T>(T*, T*, const T*, const T*, int64_t, double, T, \
                                                  bool, double*, CUstream_st*);                   \
  template void mse_loss_none_fused_vec4_cuda<T>(T*, T*, const T*, const T*, int64_t, T,          \
                                                 CUstream_st*);                                   \
  template void mse_loss_elementwise_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);      \
  template void mse_loss_backward_cuda<T>(T*, const T*, const T*, const T*, int64_t, T, bool,     \
                                          CUstream_st*);
MT_INSTANTIATE_MSE_CUDA(float)
MT_INSTANTIATE_MSE_CUDA(double)
#undef MT_INSTANTIATE_MSE_CUDA

}  // namespace minitrain
