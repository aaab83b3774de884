// Loss-scale unscaling on the GPU: multi-tensor apply of depth 1, one block per chunk.
// A thread that saw a non-finite gradient raises the flag with one atomic store; the others never
// touch it, so the flag costs nothing when the step is finite (the common case).

#include "kernels/optim/amp_math.h"
#include "kernels/optim/amp_unscale.h"
#include "kernels/multi_tensor_apply.cuh"

namespace minitrain {

__global__ void unscale_multi_kernel(TensorListArgs<1> args, float inv_scale, float* found,
                                     const float* scale_on_device) {
  // The scale kept on the device (issue 35): each block derives 1/scale itself.
  if (scale_on_device != nullptr) inv_scale = amp_inv_scale(*scale_on_device);
  const ChunkOf<1> chunk(args);
  float* g = chunk.template ptr<float>(0);
  bool bad = false;
  for (int64_t i = threadIdx.x; i < chunk.len; i += blockDim.x)
    bad |= unscale_element(g[i], inv_scale);
  if (bad) atomicExch(found, 1.0f);
}

void unscale_multi_cuda(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                        float inv_scale, float* found, CUstream_st* stream,
                        const float* scale_on_device) {
  std::vector<std::array<void*, 1>> operands(ptrs.size());
  for (std::size_t k = 0; k < ptrs.size(); ++k) operands[k][0] = ptrs[k];
  multi_tensor_apply<1>(operands, sizes, [&](const TensorListArgs<1>& a, unsigned blocks) {
    unscale_multi_kernel<<<blocks, kBlock, 0, as_cuda(stream)>>>(a, inv_scale, found,
                                                                 scale_on_device);
  });
}

// One thread: torch's _amp_update_scale_ is a single-thread kernel too.
__global__ void amp_update_scale_kernel(float* state, const float* found_inf, double growth_factor,
                                        double backoff_factor, int64_t growth_interval,
                                        double* record, const double* batches, float* raise) {
  amp_update_scale_one(state, found_inf, growth_factor, backoff_factor, growth_interval, record,
                       batches, raise);
}

void amp_update_scale_cuda(float* state, const float* found_inf, double growth_factor,
                           double backoff_factor, int64_t growth_interval, double* record,
                           CUstream_st* stream, const double* batches, float* raise) {
  amp_update_scale_kernel<<<1, 1, 0, as_cuda(stream)>>>(
      state, found_inf, growth_factor, backoff_factor, growth_interval, record, batches, raise);
  CHECK_CUDA_LAUNCH();
}

__global__ void scale_by_loss_scale_kernel(float* grad, int64_t n, const float* state,
                                           double divisor) {
  const float alpha = static_cast<float>(static_cast<double>(state[0]) / divisor);
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    grad[i] = alpha * grad[i];
}

void scale_by_loss_scale_cuda(float* grad, int64_t n, const float* state, double divisor,
                              CUstream_st* stream) {
  if (n == 0) return;
  scale_by_loss_scale_kernel<<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(grad, n, state, divisor);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
