// The vectorized and fused memory-bound kernels against their unfused composition and against
// host references, on odd sizes (1, 3, 17, 1023, 4099: pack tails) and on misaligned views made
// with narrow (pointers 4 or 8 bytes past a 16-byte boundary: the scalar paths), on each device.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/activation.h"
#include "kernels/bias_activation.h"
#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/loss/mse_loss.h"
#include "kernels/reduce.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_tensor;

const int64_t kSizes[] = {1, 3, 17, 1023, 4099};
const Activation kActivations[] = {Activation::ReLU, Activation::GELU, Activation::GELUTanh,
                                   Activation::Tanh, Activation::Sigmoid};

// A [n] tensor whose data starts `offset` elements into its storage: offset 1 misaligns a float
// or double pointer (4 or 8 bytes past 16-byte alignment), forcing the scalar paths.
Tensor vector_at(int64_t n, int64_t offset, uint32_t seed, Device d, DType dtype) {
  return random_tensor({n + offset}, seed, d, dtype, -2.0, 2.0).narrow(offset, n);
}

// [rows, cols] starting `offset_rows` rows into its storage.
Tensor matrix_at(int64_t rows, int64_t cols, int64_t offset_rows, uint32_t seed, Device d,
                 DType dtype) {
  return random_tensor({rows + offset_rows, cols}, seed, d, dtype, -2.0, 2.0)
      .narrow(offset_rows, rows);
}

::testing::AssertionResult bitwise_equal(const Tensor& got, const Tensor& want) {
  const std::vector<double> g = host_values(got), w = host_values(want);
  if (g.size() != w.size())
    return ::testing::AssertionFailure() << "sizes " << g.size() << " and " << w.size();
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!(g[i] == w[i] || (std::isnan(g[i]) && std::isnan(w[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << " of " << g.size() << ": got " << g[i] << ", want " << w[i];
  return ::testing::AssertionSuccess();
}

Tensor ones(const Shape& shape, DType dtype, Device d) {
  const std::vector<double> v(static_cast<std::size_t>(shape.numel()), 1.0);
  if (dtype == DType::Float64) return Tensor::from_vector(v, shape, d);
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), shape, d);
}

class FusedKernels : public testing::DeviceTest {};

TEST_P(FusedKernels, VectorizedElementwiseMatchesHostOnOddSizesAndMisalignedViews) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : kSizes)
      for (int64_t offset : {0, 1}) {
        SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
        const Tensor a = vector_at(n, offset, 11, device(), dtype);
        const Tensor b = vector_at(n, offset, 12, device(), dtype);
        const std::vector<double> av = host_values(a), bv = host_values(b);
        std::vector<double> sum(n), prod(n), diff(n), mx(n), scaled(n), ax(n);
        for (int64_t i = 0; i < n; ++i) {
          // Each result rounded once to the element type, as the kernels round it.
          if (dtype == DType::Float32) {
            const float x = float(av[i]), y = float(bv[i]);
            sum[i] = x + y, diff[i] = x - y, prod[i] = x * y, mx[i] = std::max(x, y);
            scaled[i] = 0.75f * x;
            ax[i] = double(x) + double(-0.5f) * double(y);  // exact in double: one rounding
          } else {
            sum[i] = av[i] + bv[i], diff[i] = av[i] - bv[i], prod[i] = av[i] * bv[i];
            mx[i] = std::max(av[i], bv[i]), scaled[i] = 0.75 * av[i];
            ax[i] = av[i] + -0.5 * bv[i];
          }
        }
        ASSERT_GT(host_max_abs(a), 0.0);
        EXPECT_EQ(host_values(add(a, b)), sum);
        EXPECT_EQ(host_values(sub(a, b)), diff);
        EXPECT_EQ(host_values(mul(a, b)), prod);
        EXPECT_EQ(host_values(maximum(a, b)), mx);
        EXPECT_EQ(host_values(scale(a, 0.75)), scaled);
        Tensor y = a.clone();
        axpy(y, -0.5, b);
        // The GPU may fuse y + alpha * x into one FMA (one rounding instead of two).
        EXPECT_ALLCLOSE(host_values(y), ax, 0.0, dtype == DType::Float32 ? 1.2e-7 : 2.3e-16);
      }
}

TEST_P(FusedKernels, VectorizedActivationsMatchCpuTwinOnMisalignedViews) {
  for (Activation act : kActivations)
    for (int64_t n : kSizes)
      for (int64_t offset : {0, 1}) {
        SCOPED_TRACE(std::string(activation_name(act)) + ", n = " + std::to_string(n) +
                     ", offset = " + std::to_string(offset));
        const Tensor x = vector_at(n, offset, 21, device(), DType::Float32);
        const Tensor g = vector_at(n, offset, 22, device(), DType::Float32);
        const Tensor y = activation_forward(x, act), gx = activation_backward(g, x, act);
        const Tensor xc = x.to(Device::cpu()), gc = g.to(Device::cpu());
        if (n >= 17) {  // relu of one negative value is 0
          ASSERT_GT(host_max_abs(y), 0.0);
        }
        // CUDA's erff/tanhf/expf are within 2 ulp of the host's.
        EXPECT_ALLCLOSE(y, activation_forward(xc, act), 1e-6, 1e-6);
        EXPECT_ALLCLOSE(gx, activation_backward(gc, xc, act), 1e-6, 1e-6);
      }
}

TEST_P(FusedKernels, ReductionsMatchHostOnMisalignedViews) {
  for (int64_t n : kSizes)
    for (int64_t offset : {0, 1}) {
      SCOPED_TRACE("n = " + std::to_string(n) + ", offset = " + std::to_string(offset));
      const Tensor x = vector_at(n, offset, 31, device(), DType::Float64);
      double s = 0, sq = 0, m = 0;
      for (double v : host_values(x)) s += v, sq += v * v, m = std::max(m, std::fabs(v));
      // Accumulated in double in another order than the host loop: rounding of the order only.
      EXPECT_NEAR(sum(x).item(), s, 1e-12 * n);
      EXPECT_NEAR(squared_norm(x).item(), sq, 1e-12 * n);
      EXPECT_EQ(max_abs(x).item(), m);
      // Run to run the bits do not change (fixed grid, no atomics).
      EXPECT_EQ(sum(x).item(), sum(x).item());
    }
}

TEST_P(FusedKernels, SumRowsMatchesHostOnOddShapes) {
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 17}, {17, 3}, {1023, 5}, {33, 4099}, {4099, 33}}) {
    const Tensor x = matrix_at(rows, cols, 1, 41, device(), DType::Float64);
    const std::vector<double> xv = host_values(x);
    std::vector<double> want(cols, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) want[c] += xv[r * cols + c];
    EXPECT_ALLCLOSE(host_values(sum_rows(x)), want, 1e-12, 1e-12);
  }
}

TEST_P(FusedKernels, BiasActivationForwardEqualsBiasAddThenActivation) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Activation act : kActivations)
      // cols 4 and 1024: packs; 1, 3, 17 and 1023: the scalar path; offset rows misalign odd cols.
      for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {3, 17}, {17, 3}, {5, 4}, {2, 1023}, {7, 1024}, {1, 4099}})
        for (int64_t offset : {0, 1}) {
          if (testing::over_size_cap(rows * cols)) continue;
          SCOPED_TRACE(std::string(activation_name(act)) + " [" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "] offset " + std::to_string(offset));
          const Tensor x = matrix_at(rows, cols, offset, 51, device(), dtype);
          const Tensor bias = vector_at(cols, offset, 52, device(), dtype);
          Tensor pre;
          const Tensor y = bias_activation_forward(x, bias, act, &pre);
          const Tensor want_pre = bias_add(x, bias);
          const Tensor want_y = activation_forward(want_pre, act);
          if (rows * cols >= 17) {  // relu may zero a few
            ASSERT_GT(host_max_abs(y), 0.0);
          }
          EXPECT_TRUE(bitwise_equal(pre, want_pre));
          EXPECT_TRUE(bitwise_equal(y, want_y));
          // Without the pre-activation, and in place (y = x).
          Tensor inplace = x.clone(), none;
          bias_activation_forward(inplace, none, inplace, bias, act);
          EXPECT_TRUE(bitwise_equal(inplace, want_y));
        }
}

TEST_P(FusedKernels, BiasActivationBackwardEqualsActivationBackwardThenSumRows) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Activation act : kActivations)
      for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
               {1, 1}, {3, 17}, {17, 3}, {1023, 4}, {2, 4099}, {300, 1000}}) {
        if (testing::over_size_cap(rows * cols)) continue;
        SCOPED_TRACE(std::string(activation_name(act)) + " [" + std::to_string(rows) + ", " +
                     std::to_string(cols) + "]");
        const Tensor pre = matrix_at(rows, cols, 1, 61, device(), dtype);
        const Tensor gy = matrix_at(rows, cols, 0, 62, device(), dtype);
        Tensor grad_pre = Tensor::empty(pre.shape(), dtype, device());
        Tensor grad_bias = Tensor::empty({cols}, dtype, device());
        bias_activation_backward(grad_pre, grad_bias, gy, pre, act);
        const Tensor want_pre = activation_backward(gy, pre, act);
        if (rows * cols >= 17) {
          ASSERT_GT(host_max_abs(grad_pre), 0.0);
        }
        EXPECT_TRUE(bitwise_equal(grad_pre, want_pre));
        EXPECT_TRUE(bitwise_equal(grad_bias, sum_rows(want_pre)));
      }
}

TEST_P(FusedKernels, BiasActivationRejectsMismatchedBias) {
  const Tensor x = Tensor::zeros({4, 3}, DType::Float32, device());
  const Tensor bias = Tensor::zeros({4}, DType::Float32, device());
  EXPECT_THAT(error_message([&] { bias_activation_forward(x, bias, Activation::ReLU); }),
              HasSubstr("bias_activation_forward: bias has 4 entries but x has 3 columns"));
  Tensor gp = Tensor::zeros({4, 3}, DType::Float32, device());
  Tensor gb = Tensor::zeros({4}, DType::Float32, device());
  EXPECT_THAT(error_message([&] { bias_activation_backward(gp, gb, x, x, Activation::Tanh); }),
              HasSubstr("bias_activation_backward: bias has 4 entries but x has 3 columns"));
}

TEST_P(FusedKernels, MseForwardBackwardEqualsForwardThenBackward) {
  for (DType dtype : {DType::Float32, DType::Float64})
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
      // 40000: several 16K-element CPU chunks and many GPU blocks.
      for (int64_t n : {1, 3, 17, 1023, 4099, 40000})
        for (int64_t offset : {0, 1}) {
          if (testing::over_size_cap(n)) continue;
          SCOPED_TRACE(std::string(reduction_name(r)) + ", n = " + std::to_string(n) +
                       ", offset = " + std::to_string(offset));
          const Tensor pred = vector_at(n, offset, 71, device(), dtype);
          const Tensor target = vector_at(n, offset, 72, device(), dtype);
          const Shape loss_shape = r == Reduction::None ? pred.shape() : Shape{};
          Tensor loss = Tensor::empty(loss_shape, dtype, device());
          Tensor grad = Tensor::empty(pred.shape(), dtype, device());
          mse_loss_forward_backward(loss, grad, pred, target, r);
          const Tensor g1 = ones(r == Reduction::None ? pred.shape() : Shape{}, dtype, device());
          ASSERT_GT(host_max_abs(grad), 0.0);
          EXPECT_TRUE(bitwise_equal(loss, mse_loss_forward(pred, target, r)));
          EXPECT_TRUE(bitwise_equal(grad, mse_loss_backward(g1, pred, target, r)));
          // In place: the gradient over pred.
          Tensor p2 = pred.clone();
          mse_loss_forward_backward(loss, p2, p2, target, r);
          EXPECT_TRUE(bitwise_equal(p2, grad));
        }
}

TEST_P(FusedKernels, MseForwardBackwardRejectsNonScalarOut) {
  const Tensor p = Tensor::zeros({5}, DType::Float32, device());
  Tensor out = Tensor::zeros({5}, DType::Float32, device()), g = p.clone();
  EXPECT_THAT(error_message([&] { mse_loss_forward_backward(out, g, p, p, Reduction::Mean); }),
              HasSubstr("mse_loss_forward_backward: with reduction 'mean' out must be 0-d"));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(FusedKernels);

}  // namespace
}  // namespace minitrain
