// Element-wise arithmetic on the GPU: grid-stride loops, one thread per element per pass.
// Memory-bound: 12 bytes (float) per add/sub/mul, 8 per scale, 12 per axpy, and one or two flops,
// so these run at DRAM bandwidth; wider (float4) accesses are a later refinement.

#include "kernels/cuda_launch.cuh"
#include "kernels/elementwise.h"

namespace minitrain {

// ---- CUDA kernels ----

template <typename T, typename Op>
__global__ void binary_kernel(T* out, const T* a, const T* b, int64_t n, Op op) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = op(a[i], b[i]);  // no __restrict__: out may be a or b
}

template <typename T>
__global__ void scale_kernel(T* out, const T* x, T alpha, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = alpha * x[i];
}

template <typename T>
__global__ void axpy_kernel(T* y, T alpha, const T* x, int64_t n) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] = y[i] + alpha * x[i];
}

// ---- launchers ----

namespace {
template <typename T, typename Op>
void launch_binary(T* out, const T* a, const T* b, int64_t n, Op op, CUstream_st* stream) {
  if (n == 0) return;
  binary_kernel<T, Op><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, a, b, n, op);
  CHECK_CUDA_LAUNCH();
}
}  // namespace

template <typename T>
void add_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  launch_binary(out, a, b, n, AddOp{}, stream);
}
template <typename T>
void sub_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  launch_binary(out, a, b, n, SubOp{}, stream);
}
template <typename T>
void mul_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  launch_binary(out, a, b, n, MulOp{}, stream);
}

template <typename T>
void max_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  launch_binary(out, a, b, n, MaxOp{}, stream);
}

template <typename T>
void scale_cuda(T* out, const T* x, T alpha, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  scale_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(out, x, alpha, n);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void axpy_cuda(T* y, T alpha, const T* x, int64_t n, CUstream_st* stream) {
  if (n == 0) return;
  axpy_kernel<T><<<grid_for(n), kBlock, 0, as_cuda(stream)>>>(y, alpha, x, n);
  CHECK_CUDA_LAUNCH();
}

#define MT_INSTANTIATE_ELEMENTWISE_CUDA(T)                                        \
  template void add_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);      \
  template void sub_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);      \
  template void mul_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);      \
  template void max_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*);      \
  template void scale_cuda<T>(T*, const T*, T, int64_t, CUstream_st*);           \
  template void axpy_cuda<T>(T*, T, const T*, int64_t, CUstream_st*);
MT_INSTANTIATE_ELEMENTWISE_CUDA(float)
MT_INSTANTIATE_ELEMENTWISE_CUDA(double)
#undef MT_INSTANTIATE_ELEMENTWISE_CUDA

}  // namespace minitrain
