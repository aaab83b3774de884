// Cast on the GPU: a grid-stride loop, one conversion per element, with the CPU loop's
// conversion (kernels/convert.h), so both devices give the same bits. Memory-bound: 6 to 12 bytes
// moved per element, at the device's bandwidth.

#include "kernels/cast.h"
#include "kernels/cast_pairs.h"
#include "kernels/convert.h"
#include "kernels/cuda_launch.cuh"

namespace minitrain {

template <typename To, typename From>
__global__ void cast_kernel(To* out, const From* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = convert<To>(in[i]);
}

template <typename To, typename From>
void cast_cuda(To* out, const From* in, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  cast_kernel<To, From><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, in, n);
  CHECK_CUDA_LAUNCH();
}
#define MT_INSTANTIATE_CAST_CUDA(To, From) \
  template void cast_cuda<To, From>(To*, const From*, int64_t, CUstream_st*);
MT_CAST_PAIRS(MT_INSTANTIATE_CAST_CUDA)

template <typename T>
__global__ void round_to_precision_kernel(float* out, const float* in, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = round_to<T>(in[i]);
}

template <typename T>
void round_to_precision_cuda(float* out, const float* in, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  round_to_precision_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, in, n);
  CHECK_CUDA_LAUNCH();
}
template void round_to_precision_cuda<BFloat16>(float*, const float*, int64_t, CUstream_st*);
template void round_to_precision_cuda<Half>(float*, const float*, int64_t, CUstream_st*);

}  // namespace minitrain
