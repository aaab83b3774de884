// A Linear layer's GEMMs by backend name, and on the CPU's OpenBLAS path with their neighbours in
// the GEMM's parallel region: each tile of the product gets its element-wise work (bias add,
// activation, activation backward) right after it, on the thread that made it, while the tile
// is in cache; the bias gradient's column sums are tasks beside dW's tiles. The per-element math
// is the unfused kernels' own (bias_add_row_cpu, activation_*_range_cpu, sum_rows_columns_cpu)
// and the tiles are fixed by the shape, so the bits are the unfused composition's.

#include "kernels/linear_layer.h"

#include <algorithm>

#include "core/op_profiler.h"
#include "core/parallel_for.h"
#include "kernels/bias_activation.h"
#include "kernels/bias_add.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_check.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/reduce.h"

#if MINITRAIN_WITH_CUDA_LIBS
#include "kernels/gemm/gemm_cublaslt.h"
#endif

namespace minitrain {

bool is_cpu_openblas_gemm(const std::string& backend, const Tensor& c) {
  return c.defined() && c.device().is_cpu() && (backend == "auto" || backend == "openblas") &&
         (c.dtype() == DType::Float32 || c.dtype() == DType::Float64);
}

namespace {

// bias_add's checks, with its messages.
void check_bias(const Tensor& y, const Tensor& b, int64_t cols) {
  check_compatible("bias_add", {{"out", y}, {"bias", b}});
  check_ndim("bias_add", {"bias", b}, 1);
  MT_CHECK_AS(ShapeError, b.size(0) == cols, "bias_add: bias has ", b.size(0),
              " entries but x has ", cols, " columns (x ", y.shape(), ", bias ", b.shape(), ")");
}

// y = x W^T (+ b) and, with `act`, out = act(y), on the CPU: gemm_cpu with bias_add's and
// activation_forward's row math as the tile epilogue.
void linear_forward_cpu_fused(Tensor* out, Tensor& y, const Tensor& x, const Tensor& w,
                              const Tensor& b, Activation act) {
  const GemmDims d = check_gemm_operands("gemm_with", y, x, /*trans_a=*/false, w, /*trans_b=*/true);
  if (b.defined()) check_bias(y, b, d.n);
  if (out != nullptr) {
    check_compatible("activation_forward", {{"y", *out}, {"x", y}});
    check_same_shape("activation_forward", {{"y", *out}, {"x", y}});
  }
  if (d.m == 0 || d.n == 0) return;
  dispatch_float(y.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* yp = y.data<T>();
    T* op = out != nullptr ? out->data<T>() : nullptr;
    const T* bias = b.defined() ? b.data<T>() : nullptr;
    const int64_t n = d.n;
    auto run = [&](auto math) {
      using M = decltype(math);
      GemmCpuExtras extras;
      extras.tile_epilogue = [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t r = r0; r < r1; ++r) {
          T* row = yp + r * n;
          if (bias != nullptr) bias_add_row_cpu(row, row, bias, c0, c1);
          if (op != nullptr) activation_forward_range_cpu<M>(op + r * n, row, c0, c1);
        }
      };
      gemm_cpu<T>(yp, x.data<T>(), false, w.data<T>(), true, d.m, d.n, d.k, T(1), T(0), extras);
    };
    dispatch_activation(act, run);
  });
}

}  // namespace

void linear_forward_with(const std::string& backend, Tensor& y, const Tensor& x, const Tensor& w,
                         const Tensor& b) {
  const OpTimer timer("linear_forward", y.device());  // one row: its GEMM and epilogue inside
  if (backend == "cublaslt" && b.defined() && y.defined() && y.device().is_cuda() &&
      y.dtype() == DType::Float32) {
#if MINITRAIN_WITH_CUDA_LIBS
    linear_forward_cublaslt(y, x, w, b);
    return;
#endif
  }
  if (b.defined() && is_cpu_openblas_gemm(backend, y)) {
    linear_forward_cpu_fused(nullptr, y, x, w, b, Activation::ReLU);  // no activation
    return;
  }
  // Anything else, including "cublaslt" with the wrong device or dtype: gemm_with names the error.
  gemm_with(backend, y, x, /*trans_a=*/false, w, /*trans_b=*/true);
  if (b.defined()) bias_add(y, y, b);
}

void linear_activation_forward_with(const std::string& backend, Tensor& out, Tensor& y,
                                    const Tensor& x, const Tensor& w, const Tensor& b,
                                    Activation act) {
  const OpTimer timer("linear_activation_forward", y.device());  // one row (--profile-kernels)
  if (is_cpu_openblas_gemm(backend, y)) {
    linear_forward_cpu_fused(&out, y, x, w, b, act);
    return;
  }
  if (is_gpu_bias_activation_fusable(backend, y) && b.defined()) {
    // The GEMM, then one bias + activation pass (kernels/bias_epilogue.cuh) instead of bias_add
    // and activation_forward: t = y + b; y = t (the pre-activation, kept for the backward unless
    // out is y); out = act(t). The same per-element math in the same order, so the same bits.
    gemm_with(backend, y, x, /*trans_a=*/false, w, /*trans_b=*/true);
    Tensor pre = out.shares_storage_with(y) ? Tensor() : y;
    bias_activation_forward(out, pre, y, b, act);
    return;
  }
  linear_forward_with(backend, y, x, w, b);
  activation_forward(out, y, act);
}

bool is_gpu_bias_activation_fusable(const std::string& backend, const Tensor& c) {
  return c.defined() && c.device().is_cuda() && backend != "cublaslt" &&
         (c.dtype() == DType::Float32 || c.dtype() == DType::Float64);
}

void linear_bias_activation_grad_with(const std::string& backend, Tensor& dw, double beta,
                                      Tensor& bias_sum, Tensor& grad_pre, const Tensor& grad_out,
                                      const Tensor& pre, const Tensor& x, Activation act) {
  const OpTimer timer("linear_bias_activation_grad", dw.device());  // one row (--profile-kernels)
  // One pass for the activation's backward and the bias gradient's column sums (sum_rows' own
  // column-reduce kernel and order on the GPU), then dW's GEMM from the stored grad_pre.
  bias_activation_backward(grad_pre, bias_sum, grad_out, pre, act);
  gemm_with(backend, dw, grad_pre, /*trans_a=*/true, x, /*trans_b=*/false, 1.0, beta);
}

void linear_weight_grad_with(const std::string& backend, Tensor& dw, double beta, Tensor& bias_sum,
                             const Tensor& dy, const Tensor& x) {
  const OpTimer timer("linear_weight_grad", dw.device());  // one row (--profile-kernels)
  if (!is_cpu_openblas_gemm(backend, dw)) {
    gemm_with(backend, dw, dy, /*trans_a=*/true, x, /*trans_b=*/false, 1.0, beta);
    sum_rows(bias_sum, dy);
    return;
  }
  const GemmDims d = check_gemm_operands("gemm_with", dw, dy, /*trans_a=*/true, x, false);
  check_compatible("sum_rows", {{"out", bias_sum}, {"x", dy}});
  check_ndim("sum_rows", {"out", bias_sum}, 1);
  const int64_t rows = dy.size(0), cols = dy.size(1);
  MT_CHECK_AS(ShapeError, bias_sum.size(0) == cols, "sum_rows: out has ", bias_sum.size(0),
              " entries but x has ", cols, " columns (out ", bias_sum.shape(), ", x ", dy.shape(),
              "); out must be [cols]");
  dispatch_float(dw.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* sums = bias_sum.data<T>();
    const T* g = dy.data<T>();
    // Column ranges of about kElementwiseGrain elements each (at most 8): small enough to fill
    // the threads' gaps after dw's tiles.
    const int64_t tasks =
        std::min(cols, std::clamp<int64_t>(rows * cols / kElementwiseGrain, 1, 8));
    GemmCpuExtras extras;
    extras.side_tasks = tasks;
    extras.side_task = [=](int64_t t) {
      sum_rows_columns_cpu(sums, g, rows, cols, cols * t / tasks, cols * (t + 1) / tasks);
    };
    gemm_cpu<T>(dw.data<T>(), g, true, x.data<T>(), false, d.m, d.n, d.k, T(1), T(beta), extras);
  });
}

void linear_input_grad_activation_with(const std::string& backend, Tensor& grad_pre,
                                       const Tensor& dy, const Tensor& w, const Tensor& pre,
                                       Activation act) {
  const OpTimer timer("linear_input_grad_activation", grad_pre.device());  // one row
  if (!is_cpu_openblas_gemm(backend, grad_pre)) {
    Tensor dx = Tensor::empty(grad_pre.shape(), grad_pre.dtype(), grad_pre.device());
    gemm_with(backend, dx, dy, /*trans_a=*/false, w, /*trans_b=*/false);
    activation_backward(grad_pre, dx, pre, act);
    return;
  }
  const GemmDims d = check_gemm_operands("gemm_with", grad_pre, dy, false, w, false);
  check_compatible("activation_backward", {{"grad_x", grad_pre}, {"x", pre}});
  check_same_shape("activation_backward", {{"grad_x", grad_pre}, {"x", pre}});
  if (d.m == 0 || d.n == 0) return;
  dispatch_float(grad_pre.dtype(), [&](auto zero) {
    using T = decltype(zero);
    T* gp = grad_pre.data<T>();
    const T* xp = pre.data<T>();
    const int64_t n = d.n;
    dispatch_activation(act, [&](auto math) {
      using M = decltype(math);
      GemmCpuExtras extras;
      // In place: grad_pre holds dy w on the tile until the activation's backward replaces it.
      extras.tile_epilogue = [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t r = r0; r < r1; ++r)
          activation_backward_range_cpu<M>(gp + r * n, gp + r * n, xp + r * n, c0, c1);
      };
      gemm_cpu<T>(gp, dy.data<T>(), false, w.data<T>(), false, d.m, d.n, d.k, T(1), T(0), extras);
    });
  });
}

}  // namespace minitrain
