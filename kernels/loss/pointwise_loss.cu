// The elementwise losses on the GPU. Elementwise passes are grid-stride loops; mean/sum is
// mse_loss's deterministic two-pass reduction: pass 1 gives each of at most
// kPointwiseLossReduceBlocks blocks a grid-stride share, summed in double in registers and then
// over the block, to one double per block; pass 2 (kernels/loss/loss_reduce.cuh) folds those in a
// fixed order. The fused forward + backward is pass 1 storing the gradient on the way: the same
// code, hence the same loss. Memory-bound: one read of each input, one write of the gradient.

#include <type_traits>

#include "kernels/loss/loss_reduce.cuh"
#include "kernels/loss/pointwise_loss.h"

namespace minitrain {

// ---- CUDA kernels ----

// Pass 1: partials[blockIdx.x] = sum of the losses of this block's grid-stride share; with kGrad
// also grad[i] = norm * dloss/dpred * 1 (each element read before its gradient is stored).
template <bool kGrad, typename T, typename Math>
__global__ void pointwise_loss_partial_sums_kernel(double* partials, T* grad, const T* pred,
                                                   const T* target, int64_t n, Math math, T norm) {
  double acc = 0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T p = pred[i], t = target[i];
    acc += double(math.loss(p, t, i));
    if constexpr (kGrad) grad[i] = norm * math.derivative(p, t, i) * T(1);
  }
  acc = block_reduce<reduce_detail::SumOf>(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

// Per element: with kLoss out[i] = loss; with kGrad grad[i] = norm * dloss/dpred * g, g =
// grad_out[i] (per_element), grad_out[0], or 1 where grad_out is null (the fused call).
template <bool kLoss, bool kGrad, typename T, typename Math>
__global__ void pointwise_loss_elementwise_kernel(T* out, T* grad, const T* grad_out,
                                                  bool per_element, const T* pred, const T* target,
                                                  int64_t n, Math math, T norm) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const T p = pred[i], t = target[i];
    if constexpr (kLoss) out[i] = math.loss(p, t, i);
    if constexpr (kGrad) {
      const T g = grad_out == nullptr ? T(1) : grad_out[per_element ? i : 0];
      grad[i] = norm * math.derivative(p, t, i) * g;
    }
  }
}

namespace {
// The grid depends only on n, so the summation order (and the result) is fixed for a given n.
int reduce_blocks(int64_t n) {
  return static_cast<int>(std::min<int64_t>(kPointwiseLossReduceBlocks,
                                            std::max<int64_t>(1, (n + kBlock - 1) / kBlock)));
}

template <bool kGrad, typename T>
void launch_reduction(T* out, T* grad, const T* pred, const T* target, int64_t n,
                      const PointwiseLossArgs<T>& args, double divisor, T norm, double* workspace,
                      cudaStream_t stream) {
  const int blocks = reduce_blocks(n);
  visit_pointwise_math(args, [&](const auto& math) {
    using Math = std::decay_t<decltype(math)>;  // spelled out: the emulator deduces nothing
    pointwise_loss_partial_sums_kernel<kGrad, T, Math>
        <<<blocks, kBlock, 0, stream>>>(workspace, grad, pred, target, n, math, norm);
    CHECK_CUDA_LAUNCH();
  });
  launch_loss_sum_partials(out, workspace, blocks, divisor, stream);
}

template <bool kLoss, bool kGrad, typename T>
void launch_elementwise(T* out, T* grad, const T* grad_out, bool per_element, const T* pred,
                        const T* target, int64_t n, const PointwiseLossArgs<T>& args, T norm,
                        cudaStream_t stream) {
  if (n == 0) return;
  visit_pointwise_math(args, [&](const auto& math) {
    using Math = std::decay_t<decltype(math)>;
    pointwise_loss_elementwise_kernel<kLoss, kGrad, T, Math><<<grid_for(n), kBlock, 0, stream>>>(
        out, grad, grad_out, per_element, pred, target, n, math, norm);
    CHECK_CUDA_LAUNCH();
  });
}
}  // namespace

// ---- launchers ----

template <typename T>
void pointwise_loss_forward_cuda(T* out, const T* pred, const T* target, int64_t n,
                                 const PointwiseLossArgs<T>& args, double divisor, bool per_element,
                                 double* workspace, CUstream_st* stream) {
  if (per_element)
    launch_elementwise<true, false, T>(out, nullptr, nullptr, true, pred, target, n, args, T(0),
                                       as_cuda(stream));
  else
    launch_reduction<false, T>(out, nullptr, pred, target, n, args, divisor, T(0), workspace,
                               as_cuda(stream));
}

template <typename T>
void pointwise_loss_backward_cuda(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                                  int64_t n, const PointwiseLossArgs<T>& args, T norm,
                                  bool per_element, CUstream_st* stream) {
  launch_elementwise<false, true, T>(nullptr, grad_pred, grad_out, per_element, pred, target, n,
                                     args, norm, as_cuda(stream));
}

template <typename T>
void pointwise_loss_forward_backward_cuda(T* out, T* grad_pred, const T* pred, const T* target,
                                          int64_t n, const PointwiseLossArgs<T>& args,
                                          double divisor, T norm, bool per_element,
                                          double* workspace, CUstream_st* stream) {
  if (per_element)
    launch_elementwise<true, true, T>(out, grad_pred, nullptr, true, pred, target, n, args, norm,
                                      as_cuda(stream));
  else
    launch_reduction<true, T>(out, grad_pred, pred, target, n, args, divisor, norm, workspace,
                              as_cuda(stream));
}

#define MT_INSTANTIATE_POINTWISE_LOSS_CUDA(T)                                                      \
  template void pointwise_loss_forward_cuda<T>(T*, const T*, const T*, int64_t,                    \
                                               const PointwiseLossArgs<T>&, double, bool, double*, \
                                               CUstream_st*);                                      \
  template void pointwise_loss_backward_cuda<T>(T*, const T*, const T*, const T*, int64_t,         \
                                                const PointwiseLossArgs<T>&, T, bool,              \
                                                CUstream_st*);                                     \
  template void pointwise_loss_forward_backward_cuda<T>(T*, T*, const T*, const T*, int64_t,       \
                                                        const PointwiseLossArgs<T>&, double, T,    \
                                                        bool, double*, CUstream_st*);
MT_INSTANTIATE_POINTWISE_LOSS_CUDA(float)
MT_INSTANTIATE_POINTWISE_LOSS_CUDA(double)
#undef MT_INSTANTIATE_POINTWISE_LOSS_CUDA

}  // namespace minitrain
