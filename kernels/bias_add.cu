// Bias add on the GPU: a grid-stride loop over all rows*cols elements, the column found by a
// modulo. Memory-bound: the bias ([cols]) is read from L1/L2 after its first touch, so DRAM sees
// one read and one write of x; the 64-bit modulo is hidden behind the memory latency.

#include "kernels/bias_add.h"
#include "kernels/cuda_launch.cuh"

namespace minitrain {

template <typename T>
__global__ void bias_add_kernel(T* out, const T* x, const T* bias, int64_t n, int64_t cols) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = x[i] + bias[i % cols];
}

template <typename T>
void bias_add_cuda(T* out, const T* x, const T* bias, int64_t rows, int64_t cols,
                   CUstream_st* stream) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  bias_add_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, x, bias, n, cols);
  CHECK_CUDA_LAUNCH();
}
template void bias_add_cuda<float>(float*, const float*, const float*, int64_t, int64_t,
                                   CUstream_st*);
template void bias_add_cuda<double>(double*, const double*, const double*, int64_t, int64_t,
                                    CUstream_st*);

}  // namespace minitrain
