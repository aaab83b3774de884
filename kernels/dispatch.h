#pragma once
// Dispatch helpers for op entry points.
//
// dispatch_float(dtype, f) calls f(T{}) with T = float or double, so one templated body serves
// both element types. MT_CUDA_ONLY(stmt) compiles `stmt` in CUDA builds; in a CPU-only build a
// CUDA tensor cannot exist (Tensor creation throws DeviceError first), so the branch becomes an
// error that names the op, and the CUDA launchers are never referenced.

#include "core/dtype.h"
#include "core/error.h"

namespace minitrain {

template <typename F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
  }
  MT_THROW(DTypeError, "unsupported dtype ", dtype);
}

namespace detail {
[[noreturn]] inline void no_cuda(const char* op) {
  MT_THROW(DeviceError, op, ": this is a CPU-only build of minitrain; use --device cpu");
}
}  // namespace detail

}  // namespace minitrain

#if MINITRAIN_WITH_CUDA
#define MT_CUDA_ONLY(...) __VA_ARGS__
#else
#define MT_CUDA_ONLY(...) ::minitrain::detail::no_cuda(__func__)
#endif
