// The fused unscale + inf/NaN check of fp16 loss scaling (kernels/optim/amp_unscale.h), on every
// device: every element multiplied by the inverse scale (a power of two: exactly), and the flag
// raised by an inf or NaN anywhere in any tensor of the list, as torch's
// _amp_foreach_non_finite_check_and_unscale_ does.

#include "kernels/optim/amp_unscale.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;

class AmpUnscaleTest : public testing::DeviceTest {
 protected:
  // Tensors of odd sizes (a multi-tensor launch splits them over chunks and blocks).
  std::vector<Tensor> grads(uint32_t seed) const {
    std::vector<Tensor> g;
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize, int64_t{33}})
      g.push_back(testing::random_tensor({n}, seed++, device(), DType::Float32, -1e4, 1e4));
    return g;
  }
};

std::vector<std::vector<double>> values(const std::vector<Tensor>& ts) {
  std::vector<std::vector<double>> out;
  for (const Tensor& t : ts) out.push_back(host_values(t));
  return out;
}

TEST_P(AmpUnscaleTest, FiniteGradientsAreDividedExactlyAndNotFlagged) {
  std::vector<Tensor> g = grads(1);
  const auto before = values(g);
  EXPECT_FALSE(unscale_and_check_finite(g, std::ldexp(1.0, -16)));
  const auto after = values(g);
  for (std::size_t k = 0; k < g.size(); ++k) {
    ASSERT_GT(testing::host_max_abs(g[k]), 0.0);
    for (std::size_t i = 0; i < before[k].size(); ++i)
      ASSERT_EQ(after[k][i], std::ldexp(before[k][i], -16)) << "tensor " << k << " element " << i;
  }
}

// An inf or a NaN at the start, the middle or the end of any tensor raises the flag; every element
// (the non-finite one too) is still multiplied.
TEST_P(AmpUnscaleTest, AnyInfOrNanAnywhereIsFoundAndEveryElementStillScaled) {
  for (float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                    std::numeric_limits<float>::quiet_NaN()})
    for (std::size_t k = 0; k < 5; ++k)
      for (int where = 0; where < 3; ++where) {
        std::vector<Tensor> g = grads(10);
        std::vector<float> v;
        for (double x : host_values(g[k])) v.push_back(static_cast<float>(x));
        const std::size_t i = where == 0 ? 0 : where == 1 ? v.size() / 2 : v.size() - 1;
        v[i] = bad;
        g[k] = Tensor::from_vector(v, {int64_t(v.size())}, device());
        const auto before = values(g);
        EXPECT_TRUE(unscale_and_check_finite(g, 0.25)) << "tensor " << k << " element " << i;
        const auto after = values(g);
        for (std::size_t t = 0; t < g.size(); ++t)
          for (std::size_t j = 0; j < before[t].size(); ++j) {
            const double want = before[t][j] * 0.25;
            ASSERT_TRUE(after[t][j] == want || (std::isnan(want) && std::isnan(after[t][j])))
                << "tensor " << t << " element " << j;
          }
      }
}

TEST_P(AmpUnscaleTest, EmptyListAndEmptyTensorsAreFinite) {
  std::vector<Tensor> none;
  EXPECT_FALSE(unscale_and_check_finite(none, 0.5));
  std::vector<Tensor> empty{Tensor::zeros({0}, DType::Float32, device())};
  EXPECT_FALSE(unscale_and_check_finite(empty, 0.5));
}

TEST_P(AmpUnscaleTest, RefusesOtherDtypesNamingTheTensor) {
  std::vector<Tensor> g{Tensor::zeros({3}, DType::Float32, device()),
                        Tensor::zeros({3}, DType::Float64, device())};
  try {
    unscale_and_check_finite(g, 0.5);
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_NE(std::string(e.what()).find("gradient 1 is float64"), std::string::npos) << e.what();
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(AmpUnscaleTest);

}  // namespace
}  // namespace minitrain
