// RMSprop step on the GPU: one fused grid-stride kernel per parameter tensor, 16-byte packs when
// every operand is aligned, one element at a time otherwise. Memory-bound: 16-32 bytes an element
// (float32) against a square root, a division and ~8 flops. The math is
// kernels/optim/optimizer_math.h, shared with the CPU loop, so both give the same bits.

#include "kernels/optim/rmsprop_step.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

// ---- CUDA kernel ----

template <typename V, typename T>
__global__ void rmsprop_step_vec4_kernel(T* __restrict__ param, const T* __restrict__ grad,
                                         T* __restrict__ square_avg, T* __restrict__ grad_avg,
                                         T* __restrict__ momentum_buf, int64_t n,
                                         RmspropCoeffs<T> by_value,
                                         const RmspropCoeffs<T>* on_device,
                                         const float* found_inf) {
  // found_inf, when not null, is the loss scaler's overflow flag: set, the step is skipped
  // (Note [skip on the device] in kernels/optim/skip_on_device.h).
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  // on_device, when not null, holds this step's factors (Note [step scalars on the device] in
  // multi_tensor_optim.h) and replaces by_value, which a replayed graph would repeat.
  const RmspropCoeffs<T> c = on_device != nullptr ? *on_device : by_value;
  constexpr int W = Pack<T>::kSize;
  const int64_t tid = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  int64_t scalar_begin = 0;
  if (is_aligned16(param) && is_aligned16(grad) && is_aligned16(square_avg) &&
      (!V::kCentered || is_aligned16(grad_avg)) && (!V::kMomentum || is_aligned16(momentum_buf))) {
    for (int64_t q = tid; q < n / W; q += stride) {
      Pack<T> p = load_pack(param + q * W), sq = load_pack(square_avg + q * W);
      const Pack<T> g = load_pack(grad + q * W);
      Pack<T> ga{}, buf{};
      if constexpr (V::kCentered) ga = load_pack(grad_avg + q * W);
      if constexpr (V::kMomentum) buf = load_pack(momentum_buf + q * W);
#pragma unroll
      for (int j = 0; j < W; ++j) rmsprop_update<V>(p.v[j], g.v[j], sq.v[j], ga.v[j], buf.v[j], c);
      store_pack(param + q * W, p);
      store_pack(square_avg + q * W, sq);
      if constexpr (V::kCentered) store_pack(grad_avg + q * W, ga);
      if constexpr (V::kMomentum) store_pack(momentum_buf + q * W, buf);
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {  // the tail, or unaligned operands
    T p = param[i], sq = square_avg[i], ga = T(0), buf = T(0);
    if constexpr (V::kCentered) ga = grad_avg[i];
    if constexpr (V::kMomentum) buf = momentum_buf[i];
    rmsprop_update<V>(p, grad[i], sq, ga, buf, c);
    param[i] = p;
    square_avg[i] = sq;
    if constexpr (V::kCentered) grad_avg[i] = ga;
    if constexpr (V::kMomentum) momentum_buf[i] = buf;
  }
}

// ---- launcher ----

template <typename T>
void rmsprop_step_cuda(T* param, const T* grad, T* square_avg, T* grad_avg, T* momentum_buf,
                       int64_t n, const RMSpropStepArgs& args,
                       const RmspropCoeffs<T>* coeffs_on_device, const float* found_inf,
                       CUstream_st* stream) {
  if (n == 0) return;
  const RmspropCoeffs<T> c = rmsprop_coeffs<T>(args);
  const int64_t work = (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
  dispatch_rmsprop_variant(args, [&](auto variant) {
    using V = decltype(variant);
    rmsprop_step_vec4_kernel<V, T><<<grid_for(work), kBlock, 0, as_cuda(stream)>>>(
        param, grad, square_avg, grad_avg, momentum_buf, n, c, coeffs_on_device, found_inf);
  });
  CHECK_CUDA_LAUNCH();
}

template void rmsprop_step_cuda<float>(float*, const float*, float*, float*, float*, int64_t,
                                       const RMSpropStepArgs&, const RmspropCoeffs<float>*,
                                       const float*, CUstream_st*);
template void rmsprop_step_cuda<double>(double*, const double*, double*, double*, double*, int64_t,
                                        const RMSpropStepArgs&, const RmspropCoeffs<double>*,
                                        const float*, CUstream_st*);

}  // namespace minitrain
