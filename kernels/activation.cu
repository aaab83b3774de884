// This file holds no kernel: it launches the map kernel of kernels/vectorized.cuh.
// Activations on the GPU: the shared vectorized map (kernels/vectorized.cuh: 16-byte packs when
// aligned, a scalar tail) templated on the activation's math type, so the switch on the
// activation happens once per launch, not per element. Memory-bound: erf/tanh/exp cost a few
// instructions on the SFU/FMA pipes, well under the time to move 8-12 bytes.

#include "kernels/activation.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

namespace {
template <typename M>
struct ForwardOf {
  template <typename T>
  MT_HOST_DEVICE T operator()(T x) const {
    return M::forward(x);
  }
};
template <typename M>
struct BackwardOf {
  template <typename T>
  MT_HOST_DEVICE T operator()(T g, T x) const {
    return M::backward(g, x);
  }
};
}  // namespace

// ---- launchers ----

template <typename T>
void activation_forward_cuda(Activation a, T* y, const T* x, int64_t n, CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    map_cuda(y, n, as_cuda(stream), ForwardOf<M>{}, x);
  });
}

template <typename T>
void activation_backward_cuda(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n,
                              CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    map_cuda(grad_x, n, as_cuda(stream), BackwardOf<M>{}, grad_y, x);
  });
}

template void activation_forward_cuda<float>(Activation, float*, const float*, int64_t,
                                             CUstream_st*);
template void activation_forward_cuda<double>(Activation, double*, const double*, int64_t,
                                              CUstream_st*);
template void activation_backward_cuda<float>(Activation, float*, const float*, const float*,
                                              int64_t, CUstream_st*);
template void activation_backward_cuda<double>(Activation, double*, const double*, const double*,
                                               int64_t, CUstream_st*);

}  // namespace minitrain
