// Activation entry points, names and CPU loops. Memory-bound for relu; the transcendental ones
// (erf, tanh, exp) cost some tens of cycles an element on the CPU, so there the loop is
// compute-bound and both cores pay off earlier.

#include "kernels/activation.h"

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// (Names: kernels/activation_names.cpp, from the table in kernels/activation.h.)

// ---- CPU reference ----

template <typename T>
void activation_forward_cpu(Activation a, T* y, const T* x, int64_t n) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      activation_forward_range_cpu<M>(y, x, begin, end);
    });
  });
}

template <typename T>
void activation_backward_cpu(Activation a, T* grad_x, const T* grad_y, const T* x, int64_t n) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
      activation_backward_range_cpu<M>(grad_x, grad_y, x, begin, end);
    });
  });
}

template void activation_forward_cpu<float>(Activation, float*, const float*, int64_t);
template void activation_forward_cpu<double>(Activation, double*, const double*, int64_t);
template void activation_backward_cpu<float>(Activation, float*, const float*, const float*,
                                             int64_t);
template void activation_backward_cpu<double>(Activation, double*, const double*, const double*,
                                              int64_t);
template void activation_forward_cpu<BFloat16>(Activation, BFloat16*, const BFloat16*, int64_t);
template void activation_forward_cpu<Half>(Activation, Half*, const Half*, int64_t);
template void activation_backward_cpu<BFloat16>(Activation, BFloat16*, const BFloat16*,
                                                const BFloat16*, int64_t);
template void activation_backward_cpu<Half>(Activation, Half*, const Half*, const Half*, int64_t);

// ---- entry points ----

void activation_forward(Tensor& y, const Tensor& x, Activation a) {
  check_compatible("activation_forward", {{"y", y}, {"x", x}});
  check_same_shape("activation_forward", {{"y", y}, {"x", x}});
  const int64_t n = x.numel();
  dispatch_op_any(
      "activation_forward", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        activation_forward_cpu<T>(a, y.data<T>(), x.data<T>(), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        activation_forward_cuda<T>(a, y.data<T>(), x.data<T>(), n, stream);
      });
}

void activation_backward(Tensor& grad_x, const Tensor& grad_y, const Tensor& x, Activation a) {
  check_compatible("activation_backward", {{"grad_x", grad_x}, {"grad_y", grad_y}, {"x", x}});
  check_same_shape("activation_backward", {{"grad_x", grad_x}, {"grad_y", grad_y}, {"x", x}});
  const int64_t n = x.numel();
  dispatch_op_any(
      "activation_backward", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        activation_backward_cpu<T>(a, grad_x.data<T>(), grad_y.data<T>(), x.data<T>(), n);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        activation_backward_cuda<T>(a, grad_x.data<T>(), grad_y.data<T>(), x.data<T>(), n, stream);
      });
}

Tensor activation_forward(const Tensor& x, Activation a) {
  check_compatible("activation_forward", {{"x", x}});
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  activation_forward(y, x, a);
  return y;
}

Tensor activation_backward(const Tensor& grad_y, const Tensor& x, Activation a) {
  check_compatible("activation_backward", {{"grad_y", grad_y}, {"x", x}});
  check_same_shape("activation_backward", {{"grad_y", grad_y}, {"x", x}});
  Tensor grad_x = Tensor::empty(x.shape(), x.dtype(), x.device());
  activation_backward(grad_x, grad_y, x, a);
  return grad_x;
}

}  // namespace minitrain
