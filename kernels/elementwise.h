#pragma once
// Element-wise arithmetic on tensors of one shape: add, sub, mul, maximum, scale, axpy.
// Memory-bound: a few flops per 8-12 bytes moved. `out` may be one of the inputs (in-place use); a
// view that overlaps an input only partly is not supported.

#include <cstdint>

#include "core/host_device.h"
#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// out = a + b, out = a - b, out = a * b (all of one shape, device and dtype).
void add(Tensor& out, const Tensor& a, const Tensor& b);
void sub(Tensor& out, const Tensor& a, const Tensor& b);
void mul(Tensor& out, const Tensor& a, const Tensor& b);
/// out = max(a, b) element by element; NaN in either input gives NaN (torch.maximum).
void maximum(Tensor& out, const Tensor& a, const Tensor& b);
/// out = alpha * x (alpha converted to x's dtype, as torch does with a Python scalar).
void scale(Tensor& out, const Tensor& x, double alpha);
/// y += alpha * x, computed as y + alpha * x (torch's y.add_(x, alpha=alpha)).
void axpy(Tensor& y, double alpha, const Tensor& x);

/// The same ops into a new tensor on the inputs' device.
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor scale(const Tensor& x, double alpha);

// ---- per-element math, shared by the CPU loops and the CUDA kernels ----
struct AddOp {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    return a + b;
  }
};
struct SubOp {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    return a - b;
  }
};
struct MulOp {
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    return a * b;
  }
};
struct MaxOp {  // a != a: a is NaN, which wins (as does a NaN b, through the last branch)
  template <typename T>
  MT_HOST_DEVICE T operator()(T a, T b) const {
    return (a > b || a != a) ? a : b;
  }
};

// ---- implementations (float and double are instantiated); out may equal an input ----
template <typename T>
void add_cpu(T* out, const T* a, const T* b, int64_t n);
template <typename T>
void sub_cpu(T* out, const T* a, const T* b, int64_t n);
template <typename T>
void mul_cpu(T* out, const T* a, const T* b, int64_t n);
template <typename T>
void max_cpu(T* out, const T* a, const T* b, int64_t n);
template <typename T>
void scale_cpu(T* out, const T* x, T alpha, int64_t n);
template <typename T>
void axpy_cpu(T* y, T alpha, const T* x, int64_t n);

template <typename T>
void add_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream);
template <typename T>
void sub_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream);
template <typename T>
void mul_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream);
template <typename T>
void max_cuda(T* out, const T* a, const T* b, int64_t n, CUstream_st* stream);
template <typename T>
void scale_cuda(T* out, const T* x, T alpha, int64_t n, CUstream_st* stream);
template <typename T>
void axpy_cuda(T* y, T alpha, const T* x, int64_t n, CUstream_st* stream);

}  // namespace minitrain
