// Loss-scale unscaling on the GPU: multi-tensor apply of depth 1, one block per 64K-element chunk.
// A thread that saw a non-finite gradient raises the flag with one atomic store; the others never
// touch it, so the flag costs nothing when the step is finite (the common case).

#include "kernels/optim/amp_math.h"
#include "kernels/optim/amp_unscale.h"
#include "kernels/multi_tensor_apply.cuh"

namespace minitrain {

__global__ void unscale_multi_kernel(TensorListArgs<1> args, float inv_scale, float* found) {
  const ChunkOf<1> chunk(args);
  float* g = chunk.template ptr<float>(0);
  bool bad = false;
  for (int64_t i = threadIdx.x; i < chunk.len; i += blockDim.x)
    bad |= unscale_element(g[i], inv_scale);
  if (bad) atomicExch(found, 1.0f);
}

void unscale_multi_cuda(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                        float inv_scale, float* found, CUstream_st* stream) {
  std::vector<std::array<void*, 1>> operands(ptrs.size());
  for (std::size_t k = 0; k < ptrs.size(); ++k) operands[k][0] = ptrs[k];
  multi_tensor_apply<1>(operands, sizes, [&](const TensorListArgs<1>& a, unsigned blocks) {
    unscale_multi_kernel<<<blocks, kBlock, 0, as_cuda(stream)>>>(a, inv_scale, found);
  });
}

}  // namespace minitrain
