// Adam / AdamW step on the GPU: one fused grid-stride kernel per parameter tensor, where torch's
// single-tensor path launches about ten kernels and a temporary for the denominator; 16-byte
// packs when aligned (kernels/optim/optimizer_kernels.cuh). Memory-bound: 28 bytes an element
// (float32; 36 with amsgrad) against ~12 flops and a sqrt. Many tensors at once:
// multi_tensor_optim.cu.

#include "kernels/optim/adam_step.h"
#include "kernels/optim/optimizer_kernels.cuh"

namespace minitrain {

// ---- CUDA kernel ----

template <typename V, typename T>
__global__ void adam_step_vec4_kernel(T* __restrict__ param, const T* __restrict__ grad,
                                      T* __restrict__ exp_avg, T* __restrict__ exp_avg_sq,
                                      T* __restrict__ max_exp_avg_sq, int64_t n, AdamCoeffs<T> c) {
  adam_apply_range<V>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n,
                      int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                      int64_t(gridDim.x) * blockDim.x, c);
}

// ---- launcher ----

template <typename T>
void adam_step_cuda(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, T* max_exp_avg_sq,
                    int64_t n, const AdamStepArgs& args, CUstream_st* stream) {
  if (n == 0) return;
  const AdamCoeffs<T> c = adam_coeffs<T>(args);
  const int64_t work = (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
  dispatch_adam_variant(args.decay, args.amsgrad, [&](auto variant) {
    using V = decltype(variant);
    adam_step_vec4_kernel<V, T><<<grid_for(work), kBlock, 0, as_cuda(stream)>>>(
        param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, n, c);
  });
  CHECK_CUDA_LAUNCH();
}

template void adam_step_cuda<float>(float*, const float*, float*, float*, float*, int64_t,
                                    const AdamStepArgs&, CUstream_st*);
template void adam_step_cuda<double>(double*, const double*, double*, double*, double*, int64_t,
                                     const AdamStepArgs&, CUstream_st*);

}  // namespace minitrain
