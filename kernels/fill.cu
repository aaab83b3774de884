// Fill on the GPU: a grid-stride loop of stores. Memory-bound: one write per element, so it runs
// at the device's write bandwidth; a vectorised (float4) store is a later refinement.

#include "kernels/cuda_launch.cuh"
#include "kernels/fill.h"

namespace minitrain {

template <typename T>
__global__ void fill_kernel(T* out, T value, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = value;
}

template <typename T>
void fill_cuda(T* out, T value, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  fill_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, value, n);
  CHECK_CUDA_LAUNCH();
}
template void fill_cuda<float>(float*, float, int64_t, CUstream_st*);
template void fill_cuda<double>(double*, double, int64_t, CUstream_st*);

}  // namespace minitrain
