// The fused optimizer step on the GPU, for every row of MT_OPTIMIZER_STEPS (Note [one row per
// optimizer] in optimizer_math.h): one grid-stride kernel per parameter tensor, where torch's
// single-tensor path launches one kernel per in-place op; 16-byte packs when every operand is
// aligned (kernels/optim/optimizer_kernels.cuh). Memory-bound: 12 bytes an element plus 8 per
// state tensor (float32) against a few flops. Many tensors at once: multi_tensor_optim.cu.

#include "kernels/optim/optimizer_kernels.cuh"
#include "kernels/optim/optimizer_step.h"

namespace minitrain {

// ---- CUDA kernel ----

template <typename Row, typename V, typename T>
__global__ void optimizer_step_vec4_kernel(T* __restrict__ param, const T* __restrict__ grad,
                                           StatePointers<T> state, int64_t n,
                                           typename Row::template Coeffs<T> by_value,
                                           const typename Row::template Coeffs<T>* on_device,
                                           const float* found_inf) {
  // found_inf, when not null, is the loss scaler's overflow flag: set, the step is skipped
  // (Note [skip on the device] in kernels/optim/skip_on_device.h).
  if (found_inf != nullptr && *found_inf != 0.0f) return;
  // on_device, when not null, holds this step's factors (Note [step scalars on the device] in
  // multi_tensor_optim.h) and replaces by_value, which a replayed graph would repeat.
  const typename Row::template Coeffs<T> c = on_device != nullptr ? *on_device : by_value;
  optimizer_apply_range<Row, V>(param, grad, state, n,
                                int64_t(blockIdx.x) * blockDim.x + threadIdx.x,
                                int64_t(gridDim.x) * blockDim.x, c);
}

// ---- launcher ----

template <typename Row, typename T>
void optimizer_step_cuda(T* param, const T* grad, const std::array<T*, Row::kStates>& state,
                         int64_t n, const typename Row::Args& args,
                         const typename Row::template Coeffs<T>* coeffs_on_device,
                         const float* found_inf, CUstream_st* stream) {
  if (n == 0) return;
  const auto c = Row::template coeffs<T>(args);
  StatePointers<T> s{};
  for (int k = 0; k < Row::kStates; ++k) s.s[k] = state[std::size_t(k)];
  const int64_t work = (n + Pack<T>::kSize - 1) / Pack<T>::kSize;
  Row::dispatch(args, [&](auto variant) {
    using V = decltype(variant);
    optimizer_step_vec4_kernel<Row, V, T><<<grid_for(work), kBlock, 0, as_cuda(stream)>>>(
        param, grad, s, n, c, coeffs_on_device, found_inf);
  });
  CHECK_CUDA_LAUNCH();
}

// Every row of MT_OPTIMIZER_STEPS, for float and double.
#define MT_OPTIMIZER_STEP_CUDA(Row)                                                                \
  template void optimizer_step_cuda<Row, float>(                                                   \
      float*, const float*, const std::array<float*, Row::kStates>&, int64_t, const Row::Args&,    \
      const Row::Coeffs<float>*, const float*, CUstream_st*);                                      \
  template void optimizer_step_cuda<Row, double>(                                                  \
      double*, const double*, const std::array<double*, Row::kStates>&, int64_t, const Row::Args&, \
      const Row::Coeffs<double>*, const float*, CUstream_st*);
MT_OPTIMIZER_STEPS(MT_OPTIMIZER_STEP_CUDA)
#undef MT_OPTIMIZER_STEP_CUDA

}  // namespace minitrain
