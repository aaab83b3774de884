// Bias add: entry point and CPU loop. Memory-bound: rows are split over threads, and the inner
// loop over a row (x row + bias row, both contiguous) vectorises.

#include "kernels/bias_add.h"

#include <algorithm>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

template <typename T>
void bias_add_cpu(T* out, const T* x, const T* bias, int64_t rows, int64_t cols) {
  if (cols == 0) return;
  const int64_t row_grain = std::max<int64_t>(1, kElementwiseGrain / cols);
  parallel_for(rows, row_grain, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r)
      bias_add_row_cpu(out + r * cols, x + r * cols, bias, 0, cols);
  });
}
template void bias_add_cpu<float>(float*, const float*, const float*, int64_t, int64_t);
template void bias_add_cpu<double>(double*, const double*, const double*, int64_t, int64_t);

void bias_add(Tensor& out, const Tensor& x, const Tensor& bias) {
  check_compatible("bias_add", {{"out", out}, {"x", x}, {"bias", bias}});
  check_ndim("bias_add", {"x", x}, 2);
  check_ndim("bias_add", {"bias", bias}, 1);
  MT_CHECK_AS(ShapeError, bias.size(0) == x.size(1), "bias_add: bias has ", bias.size(0),
              " entries but x has ", x.size(1), " columns (x ", x.shape(), ", bias ", bias.shape(),
              ")");
  check_same_shape("bias_add", {{"out", out}, {"x", x}});
  const int64_t rows = x.size(0), cols = x.size(1);
  dispatch_op(
      "bias_add", x.device(), x.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        bias_add_cpu<T>(out.data<T>(), x.data<T>(), bias.data<T>(), rows, cols);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        bias_add_cuda<T>(out.data<T>(), x.data<T>(), bias.data<T>(), rows, cols, stream);
      });
}

Tensor bias_add(const Tensor& x, const Tensor& bias) {
  check_compatible("bias_add", {{"x", x}, {"bias", bias}});
  Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
  bias_add(out, x, bias);
  return out;
}

}  // namespace minitrain
