// This file holds no kernel: it launches the kernels of kernels/bias_epilogue.cuh (forward) and
// kernels/column_reduce.cuh (backward).
// Fused bias + activation on the GPU. Forward: the bias-broadcast kernel
// (kernels/bias_epilogue.cuh) with the activation as its epilogue, 16-byte packs when aligned.
// Backward: the column-sum kernel of sum_rows (kernels/column_reduce.cuh) whose per-element read
// computes grad_pre = act'(pre) * grad_y and stores it on the way, so the bias gradient is summed
// in exactly sum_rows' order. Memory-bound: one read of x (forward) or of grad_y and pre
// (backward), one write of each output.

#include "kernels/bias_activation.h"
#include "kernels/bias_epilogue.cuh"
#include "kernels/column_reduce.cuh"

namespace minitrain {

namespace {
template <typename M>
struct ForwardEpilogue {
  template <typename T>
  MT_HOST_DEVICE T operator()(T t) const {
    return M::forward(t);
  }
};

// grad_pre may be grad_y: each index is read, then written, by one thread.
template <typename M, typename T>
struct BackwardAndStore {
  T* grad_pre;
  const T* grad_y;
  const T* pre;
  __device__ T operator()(int64_t i) const {
    const T g = M::backward(grad_y[i], pre[i]);
    grad_pre[i] = g;
    return g;
  }
};
}  // namespace

// ---- launchers ----

template <typename T>
void bias_activation_forward_cuda(Activation a, T* y, T* pre, const T* x, const T* bias,
                                  int64_t rows, int64_t cols, CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    bias_epilogue_cuda<T>(y, pre, x, bias, rows, cols, ForwardEpilogue<M>{}, as_cuda(stream));
  });
}

template <typename T>
void bias_activation_backward_cuda(Activation a, T* grad_pre, T* grad_bias, const T* grad_y,
                                   const T* pre, int64_t rows, int64_t cols, CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    column_sum_cuda(grad_bias, rows, cols, BackwardAndStore<M, T>{grad_pre, grad_y, pre},
                    as_cuda(stream));
  });
}

#define MT_INSTANTIATE_BIAS_ACTIVATION_CUDA(T)                                                    \
  template void bias_activation_forward_cuda<T>(Activation, T*, T*, const T*, const T*, int64_t,  \
                                                int64_t, CUstream_st*);                           \
  template void bias_activation_backward_cuda<T>(Activation, T*, T*, const T*, const T*, int64_t, \
                                                 int64_t, CUstream_st*);
MT_INSTANTIATE_BIAS_ACTIVATION_CUDA(float)
MT_INSTANTIATE_BIAS_ACTIVATION_CUDA(double)
#undef MT_INSTANTIATE_BIAS_ACTIVATION_CUDA

}  // namespace minitrain
