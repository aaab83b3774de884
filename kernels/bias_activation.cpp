// Fused bias + activation: entry points and CPU loops. The forward walks rows (split over
// threads) and computes t = x + b, pre = t, y = act(t) in one sweep; the backward walks column
// ranges row by row as sum_rows_cpu does, so each column's bias gradient is summed in the same
// order as the unfused sum_rows and comes out bit-identical. Memory-bound for relu; the
// transcendental activations are compute-bound on the CPU.

#include "kernels/bias_activation.h"

#include <algorithm>
#include <vector>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

template <typename T>
void bias_activation_forward_cpu(Activation a, T* y, T* pre, const T* x, const T* bias,
                                 int64_t rows, int64_t cols) {
  if (cols == 0) return;
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    const int64_t row_grain = std::max<int64_t>(1, kElementwiseGrain / cols);
    parallel_for(rows, row_grain, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* xr = x + r * cols;
        T* yr = y + r * cols;
        if (pre != nullptr) {
          T* pr = pre + r * cols;
          for (int64_t c = 0; c < cols; ++c) {
            const T t = xr[c] + bias[c];
            pr[c] = t;
            yr[c] = M::forward(t);
          }
        } else {
          for (int64_t c = 0; c < cols; ++c) yr[c] = M::forward(xr[c] + bias[c]);
        }
      }
    });
  });
}

template <typename T>
void bias_activation_backward_cpu(Activation a, T* grad_pre, T* grad_bias, const T* grad_y,
                                  const T* pre, int64_t rows, int64_t cols) {
  dispatch_activation(a, [&](auto math) {
    using M = decltype(math);
    // The same column split and grain as sum_rows_cpu (the order of each column's sum matters;
    // the split does not, as columns are independent).
    const int64_t grain = std::max<int64_t>(64, kElementwiseGrain / std::max<int64_t>(rows, 1));
    parallel_for(cols, grain, [&](int64_t begin, int64_t end) {
      std::vector<double> acc(static_cast<std::size_t>(end - begin), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = r * cols + begin;
        for (int64_t j = 0; j < end - begin; ++j) {
          const T g = M::backward(grad_y[off + j], pre[off + j]);
          grad_pre[off + j] = g;
          acc[j] += static_cast<double>(g);
        }
      }
      for (int64_t j = 0; j < end - begin; ++j) grad_bias[begin + j] = static_cast<T>(acc[j]);
    });
  });
}

#define MT_INSTANTIATE_BIAS_ACTIVATION_CPU(T)                                                    \
  template void bias_activation_forward_cpu<T>(Activation, T*, T*, const T*, const T*, int64_t,  \
                                               int64_t);                                         \
  template void bias_activation_backward_cpu<T>(Activation, T*, T*, const T*, const T*, int64_t, \
                                                int64_t);
MT_INSTANTIATE_BIAS_ACTIVATION_CPU(float)
MT_INSTANTIATE_BIAS_ACTIVATION_CPU(double)
#undef MT_INSTANTIATE_BIAS_ACTIVATION_CPU

// ---- entry points ----

namespace {
void check_bias(const char* op, const Tensor& x, const Tensor& bias) {
  check_ndim(op, {"x", x}, 2);
  check_ndim(op, {"bias", bias}, 1);
  MT_CHECK_AS(ShapeError, bias.size(0) == x.size(1), op, ": bias has ", bias.size(0),
              " entries but x has ", x.size(1), " columns (x ", x.shape(), ", bias ", bias.shape(),
              "); bias must be [cols]");
}
}  // namespace

void bias_activation_forward(Tensor& y, Tensor& pre, const Tensor& x, const Tensor& bias,
                             Activation a) {
  const char* op = "bias_activation_forward";
  const bool keep = pre.defined();
  if (keep) {
    check_compatible(op, {{"y", y}, {"pre", pre}, {"x", x}, {"bias", bias}});
    check_same_shape(op, {{"y", y}, {"pre", pre}, {"x", x}});
  } else {
    check_compatible(op, {{"y", y}, {"x", x}, {"bias", bias}});
    check_same_shape(op, {{"y", y}, {"x", x}});
  }
  check_bias(op, x, bias);
  const int64_t rows = x.size(0), cols = x.size(1);
  dispatch_op(
      "bias_activation_forward", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        bias_activation_forward_cpu<T>(a, y.data<T>(), keep ? pre.data<T>() : nullptr, x.data<T>(),
                                       bias.data<T>(), rows, cols);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        bias_activation_forward_cuda<T>(a, y.data<T>(), keep ? pre.data<T>() : nullptr, x.data<T>(),
                                        bias.data<T>(), rows, cols, stream);
      });
}

Tensor bias_activation_forward(const Tensor& x, const Tensor& bias, Activation a, Tensor* pre_out) {
  const char* op = "bias_activation_forward";
  check_compatible(op, {{"x", x}, {"bias", bias}});
  check_bias(op, x, bias);
  Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
  Tensor pre;
  if (pre_out != nullptr) pre = Tensor::empty(x.shape(), x.dtype(), x.device());
  bias_activation_forward(y, pre, x, bias, a);
  if (pre_out != nullptr) *pre_out = pre;
  return y;
}

void bias_activation_backward(Tensor& grad_pre, Tensor& grad_bias, const Tensor& grad_y,
                              const Tensor& pre, Activation a) {
  const char* op = "bias_activation_backward";
  check_compatible(
      op, {{"grad_pre", grad_pre}, {"grad_bias", grad_bias}, {"grad_y", grad_y}, {"pre", pre}});
  check_same_shape(op, {{"grad_pre", grad_pre}, {"grad_y", grad_y}, {"pre", pre}});
  check_bias(op, pre, grad_bias);
  const int64_t rows = pre.size(0), cols = pre.size(1);
  dispatch_op(
      "bias_activation_backward", pre.device(), pre.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        bias_activation_backward_cpu<T>(a, grad_pre.data<T>(), grad_bias.data<T>(),
                                        grad_y.data<T>(), pre.data<T>(), rows, cols);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        bias_activation_backward_cuda<T>(a, grad_pre.data<T>(), grad_bias.data<T>(),
                                         grad_y.data<T>(), pre.data<T>(), rows, cols, stream);
      });
}

}  // namespace minitrain
