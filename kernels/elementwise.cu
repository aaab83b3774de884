// This file holds no kernel: it launches the map kernel of kernels/vectorized.cuh.
// Element-wise arithmetic on the GPU: grid-stride loops over 16-byte packs (float4 / double2)
// when the pointers allow, one element at a time otherwise (kernels/vectorized.cuh).
// Memory-bound: 12 bytes (float) per add/sub/mul, 8 per scale, 12 per axpy, and one or two flops,
// so they run at DRAM bandwidth; the packs cut the load/store instructions four-fold.

#include "kernels/elementwise.h"
#include "kernels/vectorized.cuh"

namespace minitrain {

namespace {
// The per-element math of scale and axpy, with the scalar captured (the binary ops are AddOp...).
template <typename T>
struct ScaleBy {
  T alpha;
  MT_HOST_DEVICE T operator()(T x) const { return alpha * x; }
};
template <typename T>
struct AxpyOp {
  T alpha;
  MT_HOST_DEVICE T operator()(T y, T x) const { return y + alpha * x; }
};
}  // namespace

// ---- launchers ----

template <typename T>
void add_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), AddOp{}, a, b);
}
template <typename T>
void sub_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), SubOp{}, a, b);
}
template <typename T>
void mul_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), MulOp{}, a, b);
}
template <typename T>
void max_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), MaxOp{}, a, b);
}

template <typename T>
void scale_cuda(T* out, const T* x, T alpha, int64_t n, CUstream_st* stream) {
  map_cuda(out, n, as_cuda(stream), ScaleBy<T>{alpha}, x);
}

template <typename T>
void axpy_cuda(T* y, T alpha, const T* x, int64_t n, CUstream_st* stream) {
  const T* y_in = y;
  map_cuda(y, n, as_cuda(stream), AxpyOp<T>{alpha}, y_in, x);
}

#define MT_INSTANTIATE_ELEMENTWISE_CUDA(T)                                  \
  template void add_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*); \
  template void sub_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*); \
  template void mul_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*); \
  template void max_cuda<T>(T*, const T*, const T*, int64_t, CUstream_st*); \
  template void scale_cuda<T>(T*, const T*, T, int64_t, CUstream_st*);      \
  template void axpy_cuda<T>(T*, T, const T*, int64_t, CUstream_st*);
MT_INSTANTIATE_ELEMENTWISE_CUDA(float)
MT_INSTANTIATE_ELEMENTWISE_CUDA(double)
#undef MT_INSTANTIATE_ELEMENTWISE_CUDA

}  // namespace minitrain
