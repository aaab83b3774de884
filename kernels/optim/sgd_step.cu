// SGD step on the GPU: one fused grid-stride kernel per parameter tensor (torch's single-tensor
// path launches 3-5 kernels and a temporary per tensor), in 16-byte packs when aligned
// (kernels/optim/optimizer_kernels.cuh). Memory-bound: 12-20 bytes an element (float32) against two
// or three flops, so it runs at DRAM bandwidth. Many tensors at once: multi_tensor_optim.cu.

#include "kernels/optim/optimizer_kernels.cuh"
#include "kernels/optim/sgd_step.h"

namespace minitrain {

// ---- CUDA kernel ----

template <typename V, typename T>
__global__ void sgd_step_vec4_kernel(T* __restrict__ param, const T* __restrict__ grad,
                                     T* __restrict__ momentum_buf, int64_t n, SgdCoeffs<T> c) {
  sgd_apply_range<V>(param, grad, momentum_buf, n, int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                     int64_t(gridDim.x) * blockDim.x, c);
}

// ---- launcher ----

template <typename T>
void sgd_step_cuda(T* param, const T* grad, T* momentum_buf, int64_t n, const SGDStepArgs& args,
                   CUstream_st* stream) {
  if (n == 0) return;
  const SgdCoeffs<T> c{static_cast<T>(args.lr), static_cast<T>(args.weight_decay),
                       static_cast<T>(args.momentum), static_cast<T>(1.0 - args.dampening)};
  const int64_t work = (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
  auto launch = [&](auto variant) {
    using V = decltype(variant);
    sgd_step_vec4_kernel<V, T>
        <<<grid_for(work), kBlock, 0, as_cuda(stream)>>>(param, grad, momentum_buf, n, c);
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
