#pragma once
// The device loops of the fused optimizer steps, shared by the one-tensor kernels (sgd_step.cu,
// adam_step.cu) and the multi-tensor ones (multi_tensor_optim.cu): a range of elements, strided
// over threads, in 16-byte packs when every operand is aligned and one by one otherwise. The
// per-element math is kernels/optim/optimizer_math.h (shared with the CPU loops), so every path
// gives the same bits. Memory-bound: 12-20 bytes an element for SGD, 28-36 for Adam (float32).

#include "kernels/optim/optimizer_math.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

/// Elements [0, n) of one tensor; this thread takes tid, tid + stride, ... (in packs or not).
template <typename V, typename T>
__device__ __forceinline__ void sgd_apply_range(T* param, const T* grad, T* momentum_buf, int64_t n,
                                                int64_t tid, int64_t stride,
                                                const SgdCoeffs<T>& c) {
  constexpr int W = Pack<T>::kSize;
  int64_t scalar_begin = 0;
  if (is_aligned16(param) && is_aligned16(grad) && (!V::kMomentum || is_aligned16(momentum_buf))) {
    for (int64_t q = tid; q < n / W; q += stride) {
      Pack<T> p = load_pack(param + q * W);
      const Pack<T> g = load_pack(grad + q * W);
      Pack<T> buf{};
      if constexpr (V::kMomentum && !V::kFirstStep) buf = load_pack(momentum_buf + q * W);
#pragma unroll
      for (int j = 0; j < W; ++j) sgd_update<V>(p.v[j], g.v[j], buf.v[j], c);
      store_pack(param + q * W, p);
      if constexpr (V::kMomentum) store_pack(momentum_buf + q * W, buf);
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {
    T p = param[i];
    T buf = T(0);
    if constexpr (V::kMomentum && !V::kFirstStep) buf = momentum_buf[i];
    sgd_update<V>(p, grad[i], buf, c);
    param[i] = p;
    if constexpr (V::kMomentum) momentum_buf[i] = buf;
  }
}

template <typename V, typename T>
__device__ __forceinline__ void adam_apply_range(T* param, const T* grad, T* exp_avg, T* exp_avg_sq,
                                                 T* max_exp_avg_sq, int64_t n, int64_t tid,
                                                 int64_t stride, const AdamCoeffs<T>& c) {
  constexpr int W = Pack<T>::kSize;
  int64_t scalar_begin = 0;
  if (is_aligned16(param) && is_aligned16(grad) && is_aligned16(exp_avg) &&
      is_aligned16(exp_avg_sq) && (!V::kAmsgrad || is_aligned16(max_exp_avg_sq))) {
    for (int64_t q = tid; q < n / W; q += stride) {
      Pack<T> p = load_pack(param + q * W), m = load_pack(exp_avg + q * W),
              v = load_pack(exp_avg_sq + q * W);
      const Pack<T> g = load_pack(grad + q * W);
      Pack<T> vmax{};
      if constexpr (V::kAmsgrad) vmax = load_pack(max_exp_avg_sq + q * W);
#pragma unroll
      for (int j = 0; j < W; ++j) adam_update<V>(p.v[j], g.v[j], m.v[j], v.v[j], vmax.v[j], c);
      store_pack(param + q * W, p);
      store_pack(exp_avg + q * W, m);
      store_pack(exp_avg_sq + q * W, v);
      if constexpr (V::kAmsgrad) store_pack(max_exp_avg_sq + q * W, vmax);
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {
    T p = param[i], m = exp_avg[i], v = exp_avg_sq[i];
    T vmax = T(0);
    if constexpr (V::kAmsgrad) vmax = max_exp_avg_sq[i];
    adam_update<V>(p, grad[i], m, v, vmax, c);
    param[i] = p;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    if constexpr (V::kAmsgrad) max_exp_avg_sq[i] = vmax;
  }
}

}  // namespace minitrain
