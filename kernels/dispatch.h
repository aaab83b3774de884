#pragma once
// Dispatch helpers for op entry points: which device, which element type.
//
// dispatch_float(dtype, f) calls f(T{}) with T = float or double, so one templated body serves
// both element types. on_device(op, device, cpu, cuda) runs cpu() on the CPU, or cuda(stream) on a
// GPU with that device current and its current stream; dispatch_op does both at once, the whole
// body of most entry points:
//
//   dispatch_op("fill", out.device(), out.dtype(),
//       [&](auto zero) { using T = decltype(zero); fill_cpu<T>(...); },
//       [&](auto zero, auto stream) { using T = decltype(zero); fill_cuda<T>(..., stream); });
//
// The CUDA body must be a generic lambda (an `auto` parameter): its body is then compiled only
// where it is called, so in a CPU-only build, where it never is, the CUDA launchers are never
// referenced and the call site needs no #if. A CUDA tensor cannot exist in such a build (Tensor
// creation throws DeviceError first); should one reach an op anyway, the op is named in the error.

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/op_profiler.h"
#include "core/stream.h"

namespace minitrain {

template <typename F>
decltype(auto) dispatch_float(DType dtype, F&& f) {
  switch (dtype) {
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
    case DType::BFloat16:
    case DType::Float16:
      break;  // storage types: only the ops written for them take them (core/half.h)
  }
  MT_THROW(DTypeError, "this op computes in float32 or float64, not ", dtype,
           " (cast to float32 first)");
}

/// dispatch_float for ops that also take the 16-bit storage types (casts, copies of values):
/// f(float{}), f(double{}), f(BFloat16{}) or f(Half{}).
template <typename F>
decltype(auto) dispatch_any(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BFloat16:
      return f(BFloat16{});
    case DType::Float16:
      return f(Half{});
    case DType::Float32:
    case DType::Float64:
      break;
  }
  return dispatch_float(dtype, f);
}

namespace detail {
[[noreturn]] inline void no_cuda(const char* op) {
  MT_THROW(DeviceError, op, ": this is a CPU-only build of minitrain; use --device cpu");
}
}  // namespace detail

/// cpu() on the CPU; on a GPU, cuda(stream) with `device` current and `stream` its current
/// CUstream_st*. `cuda` must be a generic lambda ([&](auto stream) {...}): see the file comment.
template <typename Cpu, typename Cuda>
decltype(auto) on_device(const char* op, const Device& device, Cpu&& cpu, Cuda&& cuda) {
  const OpTimer timer(op, device);  // --profile-kernels (core/op_profiler.h); else an atomic load
  if (device.is_cpu()) return cpu();
#if MINITRAIN_WITH_CUDA
  (void)op;  // named only in the CPU-only build's error
  DeviceGuard guard(device);
  return cuda(current_stream(device).native_handle());
#else
  (void)cuda;
  detail::no_cuda(op);
#endif
}

/// on_device and dispatch_float together: cpu(T{}) on the CPU, cuda(T{}, stream) on a GPU, with
/// T = float or double by `dtype`. The device is made current before the element type is chosen.
template <typename Cpu, typename Cuda>
decltype(auto) dispatch_op(const char* op, const Device& device, DType dtype, Cpu&& cpu,
                           Cuda&& cuda) {
  return on_device(
      op, device, [&] { return dispatch_float(dtype, cpu); },
      [&](auto stream) {
        return dispatch_float(dtype, [&](auto zero) { return cuda(zero, stream); });
      });
}

/// dispatch_op for ops that also take the 16-bit storage types (dispatch_any's T).
template <typename Cpu, typename Cuda>
decltype(auto) dispatch_op_any(const char* op, const Device& device, DType dtype, Cpu&& cpu,
                               Cuda&& cuda) {
  return on_device(
      op, device, [&] { return dispatch_any(dtype, cpu); },
      [&](auto stream) {
        return dispatch_any(dtype, [&](auto zero) { return cuda(zero, stream); });
      });
}

}  // namespace minitrain

// MT_CUDA_ONLY(stmt): `stmt` in CUDA builds, the op-naming DeviceError in CPU-only ones. For the
// few entry points whose CUDA path is not one body on one device (gemm's vendor-library path).
#if MINITRAIN_WITH_CUDA
#define MT_CUDA_ONLY(...) __VA_ARGS__
#else
#define MT_CUDA_ONLY(...) ::minitrain::detail::no_cuda(__func__)
#endif
