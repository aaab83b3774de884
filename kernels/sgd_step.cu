// SGD step on the GPU: one fused grid-stride kernel per parameter tensor (torch's single-tensor
// path launches 3-5 kernels and a temporary per tensor). Memory-bound: 12-20 bytes an element
// (float32) against two or three flops, so it runs at DRAM bandwidth.

#include "kernels/cuda_launch.cuh"
#include "kernels/optimizer_math.h"
#include "kernels/sgd_step.h"

namespace minitrain {

// ---- CUDA kernel ----

template <typename V, typename T>
__global__ void sgd_step_kernel(T* __restrict__ param, const T* __restrict__ grad,
                                T* __restrict__ momentum_buf, int64_t n, SgdCoeffs<T> c) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    T p = param[i];
    T buf = T(0);
    if constexpr (V::kMomentum && !V::kFirstStep) buf = momentum_buf[i];
    sgd_update<V>(p, grad[i], buf, c);
    param[i] = p;
    if constexpr (V::kMomentum) momentum_buf[i] = buf;
  }
}

// ---- launcher ----

template <typename T>
void sgd_step_cuda(T* param, const T* grad, T* momentum_buf, int64_t n, const SGDStepArgs& args,
                   CUstream_st* stream) {
  if (n == 0) return;
  const SgdCoeffs<T> c{static_cast<T>(args.lr), static_cast<T>(args.weight_decay),
                       static_cast<T>(args.momentum), static_cast<T>(1.0 - args.dampening)};
  auto launch = [&](auto variant) {
    using V = decltype(variant);
    sgd_step_kernel<V, T>
        <<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(param, grad, momentum_buf, n, c);
  };
  dispatch_sgd_variant(args.weight_decay != 0.0, args.momentum != 0.0, args.first_step,
                       args.nesterov, launch);
  CHECK_CUDA_LAUNCH();
}

template void sgd_step_cuda<float>(float*, const float*, float*, int64_t, const SGDStepArgs&,
                                   CUstream_st*);
template void sgd_step_cuda<double>(double*, const double*, double*, int64_t, const SGDStepArgs&,
                                    CUstream_st*);

}  // namespace minitrain
