// Cast on the GPU: a grid-stride loop, one conversion per element. Memory-bound: 12 bytes moved
// per element (4 + 8), at the device's bandwidth.

#include "kernels/cast.h"
#include "kernels/cuda_launch.cuh"

namespace minitrain {

template <typename To, typename From>
__global__ void cast_kernel(To* out, const From* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<To>(in[i]);  // round-to-nearest, as the CPU conversion
}

template <typename To, typename From>
void cast_cuda(To* out, const From* in, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  cast_kernel<To, From><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, in, n);
  CHECK_CUDA_LAUNCH();
}
template void cast_cuda<float, double>(float*, const double*, int64_t, CUstream_st*);
template void cast_cuda<double, float>(double*, const float*, int64_t, CUstream_st*);

}  // namespace minitrain
