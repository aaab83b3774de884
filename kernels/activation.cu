// This file holds no kernel: it launches the map kernel of kernels/vectorized.cuh.
// Activations on the GPU: the shared vectorized map (kernels/vectorized.cuh: 16-byte packs when
// aligned, a scalar tail) templated on the activation's math type, so the switch on the
// activation happens once per launch, not per element. Memory-bound: erf/tanh/exp cost a few
// instructions on the SFU/FMA pipes, well under the time to move 4-12 bytes. bfloat16/float16
// tensors (mixed precision) go through the same map, 8 elements a pack, computed in float32.

#include "kernels/activation.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

// ---- launchers ----

template <typename T>
void activation_forward_cuda(Activation a, T* y, const T* x, int64_t n, CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    map_cuda(y, n, as_cuda(stream), ActivationOf<M>{}, x);
  });
}

template <typename T>
void activation_backward_cuda(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n,
                              CUstream_st* stream) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    map_cuda(grad_x, n, as_cuda(stream), ActivationGradOf<M>{}, grad_y, x);
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

#define MT_INSTANTIATE_ACTIVATION_CUDA_16(T)                                                 \
  template void activation_forward_cuda<T>(Activation, T*, const T*, int64_t, CUstream_st*); \
  template void activation_backward_cuda<T>(Activation, T*, const T*, const T*, int64_t,     \
                                            CUstream_st*);
MT_INSTANTIATE_ACTIVATION_CUDA_16(BFloat16)
MT_INSTANTIATE_ACTIVATION_CUDA_16(Half)
#undef MT_INSTANTIATE_ACTIVATION_CUDA_16

}  // namespace minitrain
