// Activations on the GPU: grid-stride loops templated on the activation's math type, so the
// switch on the activation happens once per launch, not per element. Memory-bound: erf/tanh/exp
// cost a few instructions on the SFU/FMA pipes, well under the time to move 8-12 bytes.

#include "kernels/activation.h"
#include "kernels/cuda_launch.cuh"

namespace minitrain {

// ---- CUDA kernels ----

template <typename M, typename T>
__global__ void activation_forward_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = M::forward(x[i]);
}

template <typename M, typename T>
__global__ void activation_backward_kernel(T* grad_x, const T* grad_y, const T* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    grad_x[i] = M::backward(grad_y[i], x[i]);
}

// ---- launchers ----

template <typename T>
void activation_forward_cuda(Activation a, T* y, const T* x, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    activation_forward_kernel<M, T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(y, x, n);
  });
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void activation_backward_cuda(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n,
                              CUstream_st* stream) {
  if (n == 0) return;
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    activation_backward_kernel<M, T>
        <<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(grad_x, grad_y, x, n);
  });
  CHECK_CUDA_LAUNCH();
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
