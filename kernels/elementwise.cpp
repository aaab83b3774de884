// Element-wise arithmetic: entry points and CPU loops. Memory-bound: each element is loaded,
// combined with one or two flops and stored, so the loops are written for the auto-vectoriser
// and split over threads (parallel_for) only when the tensor is large.

#include "kernels/elementwise.h"

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

namespace {
template <typename T, typename Op>
void binary_loop(T* out, const T* a, const T* b, int64_t n, Op op) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = op(a[i], b[i]);
  });
}
}  // namespace

template <typename T>
void add_cpu(T* out, const T* a, const T* b, int64_t n) {
  binary_loop(out, a, b, n, AddOp{});
}
template <typename T>
void sub_cpu(T* out, const T* a, const T* b, int64_t n) {
  binary_loop(out, a, b, n, SubOp{});
}
template <typename T>
void mul_cpu(T* out, const T* a, const T* b, int64_t n) {
  binary_loop(out, a, b, n, MulOp{});
}
template <typename T>
void max_cpu(T* out, const T* a, const T* b, int64_t n) {
  binary_loop(out, a, b, n, MaxOp{});
}

template <typename T>
void scale_cpu(T* out, const T* x, T alpha, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = alpha * x[i];
  });
}

template <typename T>
void axpy_cpu(T* y, T alpha, const T* x, int64_t n) {
  parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y[i] = y[i] + alpha * x[i];
  });
}

#define MT_INSTANTIATE_ELEMENTWISE_CPU(T)                    \
  template void add_cpu<T>(T*, const T*, const T*, int64_t); \
  template void sub_cpu<T>(T*, const T*, const T*, int64_t); \
  template void mul_cpu<T>(T*, const T*, const T*, int64_t); \
  template void max_cpu<T>(T*, const T*, const T*, int64_t); \
  template void scale_cpu<T>(T*, const T*, T, int64_t);      \
  template void axpy_cpu<T>(T*, T, const T*, int64_t);
MT_INSTANTIATE_ELEMENTWISE_CPU(float)
MT_INSTANTIATE_ELEMENTWISE_CPU(double)
#undef MT_INSTANTIATE_ELEMENTWISE_CPU

// ---- entry points ----

namespace {
enum class Binary { Add, Sub, Mul, Max };

template <typename T>
void binary_on_cpu(Binary kind, T* out, const T* a, const T* b, int64_t n) {
  switch (kind) {
    case Binary::Add:
      return add_cpu<T>(out, a, b, n);
    case Binary::Sub:
      return sub_cpu<T>(out, a, b, n);
    case Binary::Mul:
      return mul_cpu<T>(out, a, b, n);
    case Binary::Max:
      return max_cpu<T>(out, a, b, n);
  }
}

// A template, so a CPU-only build (which never calls it) never references the CUDA launchers.
template <typename T>
void binary_on_cuda(Binary kind, T* out, const T* a, const T* b, int64_t n, CUstream_st* s) {
  switch (kind) {
    case Binary::Add:
      return add_cuda<T>(out, a, b, n, s);
    case Binary::Sub:
      return sub_cuda<T>(out, a, b, n, s);
    case Binary::Mul:
      return mul_cuda<T>(out, a, b, n, s);
    case Binary::Max:
      return max_cuda<T>(out, a, b, n, s);
  }
}

void binary(const char* op, Binary kind, Tensor& out, const Tensor& a, const Tensor& b) {
  check_compatible(op, {{"out", out}, {"a", a}, {"b", b}});
  check_same_shape(op, {{"out", out}, {"a", a}, {"b", b}});
  const int64_t n = out.numel();
  dispatch_op(
      op, out.device(), out.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        binary_on_cpu<T>(kind, out.data<T>(), a.data<T>(), b.data<T>(), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        binary_on_cuda<T>(kind, out.data<T>(), a.data<T>(), b.data<T>(), n, stream);
      });
}

Tensor binary_new(const char* op, Binary kind, const Tensor& a, const Tensor& b) {
  // Check the inputs before making `out`, so that errors name only the caller's tensors.
  check_compatible(op, {{"a", a}, {"b", b}});
  check_same_shape(op, {{"a", a}, {"b", b}});
  Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
  binary(op, kind, out, a, b);
  return out;
}
}  // namespace

void add(Tensor& out, const Tensor& a, const Tensor& b) { binary("add", Binary::Add, out, a, b); }
void sub(Tensor& out, const Tensor& a, const Tensor& b) { binary("sub", Binary::Sub, out, a, b); }
void mul(Tensor& out, const Tensor& a, const Tensor& b) { binary("mul", Binary::Mul, out, a, b); }
void maximum(Tensor& out, const Tensor& a, const Tensor& b) {
  binary("maximum", Binary::Max, out, a, b);
}
Tensor add(const Tensor& a, const Tensor& b) { return binary_new("add", Binary::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary_new("sub", Binary::Sub, a, b); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary_new("mul", Binary::Mul, a, b); }
Tensor maximum(const Tensor& a, const Tensor& b) {
  return binary_new("maximum", Binary::Max, a, b);
}

void scale(Tensor& out, const Tensor& x, double alpha) {
  check_compatible("scale", {{"out", out}, {"x", x}});
  check_same_shape("scale", {{"out", out}, {"x", x}});
  const int64_t n = out.numel();
  dispatch_op(
      "scale", out.device(), out.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        scale_cpu<T>(out.data<T>(), x.data<T>(), static_cast<T>(alpha), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        scale_cuda<T>(out.data<T>(), x.data<T>(), static_cast<T>(alpha), n, stream);
      });
}

Tensor scale(const Tensor& x, double alpha) {
  check_compatible("scale", {{"x", x}});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  scale(out, x, alpha);
  return out;
}

void axpy(Tensor& y, double alpha, const Tensor& x) {
  check_compatible("axpy", {{"y", y}, {"x", x}});
  check_same_shape("axpy", {{"y", y}, {"x", x}});
  const int64_t n = y.numel();
  dispatch_op(
      "axpy", y.device(), y.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        axpy_cpu<T>(y.data<T>(), static_cast<T>(alpha), x.data<T>(), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        axpy_cuda<T>(y.data<T>(), static_cast<T>(alpha), x.data<T>(), n, stream);
      });
}

}  // namespace minitrain
