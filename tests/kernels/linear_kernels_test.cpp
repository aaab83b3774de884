// A Linear's fused CPU kernels (kernels/linear_layer.h) against the unfused composition they
// replace, bit for bit: the forward with the bias add (and an activation) as the GEMM's tile
// epilogue against gemm_with, bias_add (and activation_forward); the weight gradient with the
// bias's column sums beside dW's tiles against gemm_with (beta 1) then sum_rows; the input
// gradient with the activation's backward on its tiles against gemm_with then
// activation_backward. At the MLP's shapes (many tiles, run in parallel) and odd ones, for
// several thread counts and both float types. On any other device or backend the entry points
// are the unfused calls themselves.

#include "kernels/linear_layer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "kernels/activation.h"
#include "kernels/bias_add.h"
#include "kernels/fill.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/reduce.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;
using testing::random_tensor;

struct LinearShape {
  int64_t batch, in, out;
};
const LinearShape kShapes[] = {{256, 1024, 1024}, {256, 256, 1024}, {256, 1024, 1},
                               {23, 37, 19},      {1, 3, 2},        {300, 129, 257}};

TEST(LinearKernelsCpu, FusedBiasEpilogueIsGemmThenBiasAddBitForBit) {
  const int saved = num_threads();
  for (DType dtype : {DType::Float32, DType::Float64})
    for (const LinearShape& s : kShapes)
      for (int threads : {1, 2, 3}) {
        set_num_threads(threads);
        const Tensor x = random_tensor(Shape{s.batch, s.in}, 1, Device::cpu(), dtype);
        const Tensor w = random_tensor(Shape{s.out, s.in}, 2, Device::cpu(), dtype);
        const Tensor b = random_tensor(Shape{s.out}, 3, Device::cpu(), dtype);
        Tensor fused = Tensor::empty(Shape{s.batch, s.out}, dtype);
        Tensor unfused = Tensor::empty(Shape{s.batch, s.out}, dtype);
        linear_forward_with("openblas", fused, x, w, b);
        gemm_with("openblas", unfused, x, false, w, true);
        bias_add(unfused, unfused, b);
        ASSERT_GT(testing::host_max_abs(fused), 0.0);
        EXPECT_TRUE(host_values(fused) == host_values(unfused))
            << s.batch << "x" << s.in << "->" << s.out << " " << dtype << " threads=" << threads;
      }
  set_num_threads(saved);
}

TEST(LinearKernelsCpu, FusedWeightGradIsGemmThenSumRowsBitForBit) {
  const int saved = num_threads();
  // beta 1 accumulates onto a gradient; beta 0 overwrites a released one, whose stale contents
  // (NaN here) must not survive: NaN never compares equal, so the comparison below catches one.
  for (double beta : {1.0, 0.0})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const LinearShape& s : kShapes)
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          const Tensor x = random_tensor(Shape{s.batch, s.in}, 4, Device::cpu(), dtype);
          const Tensor dy = random_tensor(Shape{s.batch, s.out}, 5, Device::cpu(), dtype);
          Tensor dw0 = random_tensor(Shape{s.out, s.in}, 6, Device::cpu(), dtype);
          if (beta == 0.0) fill(dw0, std::nan(""));
          Tensor dw_fused = dw0.clone(), dw_unfused = dw0.clone();
          Tensor sums_fused = Tensor::empty(Shape{s.out}, dtype);
          Tensor sums_unfused = Tensor::empty(Shape{s.out}, dtype);
          linear_weight_grad_with("auto", dw_fused, beta, sums_fused, dy, x);
          gemm_with("openblas", dw_unfused, dy, true, x, false, 1.0, beta);
          sum_rows(sums_unfused, dy);
          ASSERT_GT(testing::host_max_abs(sums_fused), 0.0);
          const std::string what = std::to_string(s.batch) + "x" + std::to_string(s.in) + "->" +
                                   std::to_string(s.out) + " threads=" + std::to_string(threads) +
                                   " beta=" + std::to_string(beta);
          EXPECT_TRUE(host_values(dw_fused) == host_values(dw_unfused)) << what << " " << dtype;
          EXPECT_TRUE(host_values(sums_fused) == host_values(sums_unfused)) << what << " " << dtype;
        }
  set_num_threads(saved);
}

TEST(LinearKernelsCpu, FusedActivationIsLinearThenActivationBitForBit) {
  const int saved = num_threads();
  for (Activation act : {Activation::ReLU, Activation::GELU, Activation::Tanh})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const LinearShape& s : kShapes)
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          const Tensor x = random_tensor(Shape{s.batch, s.in}, 7, Device::cpu(), dtype);
          const Tensor w = random_tensor(Shape{s.out, s.in}, 8, Device::cpu(), dtype);
          const Tensor b = random_tensor(Shape{s.out}, 9, Device::cpu(), dtype);
          const Shape ys{s.batch, s.out};
          Tensor y = Tensor::empty(ys, dtype), out = Tensor::empty(ys, dtype);
          Tensor y_ref = Tensor::empty(ys, dtype), out_ref = Tensor::empty(ys, dtype);
          linear_activation_forward_with("auto", out, y, x, w, b, act);
          gemm_with("openblas", y_ref, x, false, w, true);
          bias_add(y_ref, y_ref, b);
          activation_forward(out_ref, y_ref, act);
          ASSERT_GT(testing::host_max_abs(y), 0.0);  // (a ReLU of one column may be all zeros)
          const std::string what = std::string(activation_name(act)) + " " +
                                   std::to_string(s.batch) + "x" + std::to_string(s.in) + "->" +
                                   std::to_string(s.out) + " threads=" + std::to_string(threads);
          EXPECT_TRUE(host_values(y) == host_values(y_ref)) << what << " " << dtype;
          EXPECT_TRUE(host_values(out) == host_values(out_ref)) << what << " " << dtype;
        }
  set_num_threads(saved);
}

TEST(LinearKernelsCpu, FusedInputGradThroughActivationIsGemmThenBackwardBitForBit) {
  const int saved = num_threads();
  for (Activation act : {Activation::ReLU, Activation::GELUTanh, Activation::Sigmoid})
    for (DType dtype : {DType::Float32, DType::Float64})
      for (const LinearShape& s : kShapes)
        for (int threads : {1, 2, 3}) {
          set_num_threads(threads);
          const Tensor dy = random_tensor(Shape{s.batch, s.out}, 10, Device::cpu(), dtype);
          const Tensor w = random_tensor(Shape{s.out, s.in}, 11, Device::cpu(), dtype);
          const Tensor pre = random_tensor(Shape{s.batch, s.in}, 12, Device::cpu(), dtype);
          const Shape xs{s.batch, s.in};
          Tensor got = Tensor::empty(xs, dtype), dx = Tensor::empty(xs, dtype);
          Tensor want = Tensor::empty(xs, dtype);
          linear_input_grad_activation_with("openblas", got, dy, w, pre, act);
          gemm_with("openblas", dx, dy, false, w, false);
          activation_backward(want, dx, pre, act);
          ASSERT_GT(testing::host_max_abs(got), 0.0);
          EXPECT_TRUE(host_values(got) == host_values(want))
              << activation_name(act) << " " << s.batch << "x" << s.in << "->" << s.out << " "
              << dtype << " threads=" << threads;
        }
  set_num_threads(saved);
}

TEST(LinearKernelsCpu, FusedPathsCheckTheBiasAsTheUnfusedOnesDo) {
  const Tensor x = random_tensor(Shape{4, 3}, 1), w = random_tensor(Shape{5, 3}, 2);
  Tensor y = Tensor::empty(Shape{4, 5});
  const Tensor short_bias = random_tensor(Shape{4}, 3);
  EXPECT_THROW(linear_forward_with("openblas", y, x, w, short_bias), ShapeError);
  const Tensor dy = random_tensor(Shape{4, 5}, 4);
  Tensor dw = Tensor::zeros(Shape{5, 3}), short_sums = Tensor::empty(Shape{4});
  EXPECT_THROW(linear_weight_grad_with("openblas", dw, 1.0, short_sums, dy, x), ShapeError);
}

}  // namespace
}  // namespace minitrain
