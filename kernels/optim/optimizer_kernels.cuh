#pragma once
// The device loop of the fused optimizer steps, shared by the one-tensor kernel
// (optimizer_step.cu) and the multi-tensor ones (multi_tensor_optim.cu), for every row of
// MT_OPTIMIZER_STEPS (Note [one row per optimizer] in optimizer_math.h): a range of elements,
// strided over threads, in 16-byte packs when every operand is aligned and one by one otherwise.
// The per-element math is the row's update() (shared with the CPU loop), so every path gives the
// same bits. Memory-bound: 12 bytes an element plus 8 per state tensor (float32).

#include "kernels/optim/optimizer_math.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

/// A row's state operands as a kernel argument; the ones the variant does not use are null.
template <typename T>
struct StatePointers {
  T* s[kMaxOptimizerStates];
};

/// Elements [0, n) of one tensor; this thread takes tid, tid + stride, ... (in packs or not).
/// The state the variant uses is loaded (where it reads it) and stored; the rest is not touched.
template <typename Row, typename V, typename T>
__device__ __forceinline__ void optimizer_apply_range(T* param, const T* grad,
                                                      const StatePointers<T>& state, int64_t n,
                                                      int64_t tid, int64_t stride,
                                                      const typename Row::template Coeffs<T>& c) {
  constexpr int K = Row::kStates;
  constexpr int W = Pack<T>::kSize;
  bool aligned = is_aligned16(param) && is_aligned16(grad);
#pragma unroll
  for (int k = 0; k < K; ++k)
    if (Row::template uses<V>(k)) aligned = aligned && is_aligned16(state.s[k]);
  int64_t scalar_begin = 0;
  if (aligned) {
    for (int64_t q = tid; q < n / W; q += stride) {
      Pack<T> p = load_pack(param + q * W);
      const Pack<T> g = load_pack(grad + q * W);
      Pack<T> s[K];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        s[k] = Pack<T>{};
        if (Row::template reads<V>(k)) s[k] = load_pack(state.s[k] + q * W);
      }
#pragma unroll
      for (int j = 0; j < W; ++j) {
        T e[kMaxOptimizerStates] = {};
#pragma unroll
        for (int k = 0; k < K; ++k) e[k] = s[k].v[j];
        Row::template update<V>(p.v[j], g.v[j], e, c);
#pragma unroll
        for (int k = 0; k < K; ++k) s[k].v[j] = e[k];
      }
      store_pack(param + q * W, p);
#pragma unroll
      for (int k = 0; k < K; ++k)
        if (Row::template uses<V>(k)) store_pack(state.s[k] + q * W, s[k]);
    }
    scalar_begin = n / W * W;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) {  // the tail, or unaligned operands
    T p = param[i];
    T e[kMaxOptimizerStates] = {};
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (Row::template reads<V>(k)) e[k] = state.s[k][i];
    Row::template update<V>(p, grad[i], e, c);
    param[i] = p;
#pragma unroll
    for (int k = 0; k < K; ++k)
      if (Row::template uses<V>(k)) state.s[k][i] = e[k];
  }
}

}  // namespace minitrain
