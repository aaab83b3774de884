// clip_grad_norm_: the global 2-norm over all gradients, scaled by max_norm / (norm + 1e-6) when
// above max_norm (torch's clip_coef clamped to 1), untouched below it.

#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/option_error.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;

double reference_norm(const ParamSet& ps) {
  double sq = 0;
  for (const auto& g : ps.grads())
    for (double x : g) sq += x * x;
  return std::sqrt(sq);
}

TEST(ClipGradNorm, ReturnsTheTotalNormAndScalesAboveTheLimit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    ParamSet ps(dtype);
    ps.set_grads(0);  // U(-1, 1) over 1008 elements: norm about 18
    const auto before = ps.grads();
    const double want = reference_norm(ps);
    const double got = clip_grad_norm_(ps.named(), 2.0);
    // The per-tensor squared norms are rounded to the gradient's type once (float32: 6e-8).
    EXPECT_NEAR(got, want, 1e-6 * want);
    const double coef = 2.0 / (want + 1e-6);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      std::vector<double> scaled = before[i];
      for (double& x : scaled) x *= coef;
      EXPECT_ALLCLOSE(ps.grads()[i], scaled, 1e-7, 1e-6);
    }
    EXPECT_NEAR(reference_norm(ps), 2.0, 1e-5);
  }
}

TEST(ClipGradNorm, LeavesGradientsAloneAtOrBelowTheLimit) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  const auto before = ps.grads();
  const double norm = reference_norm(ps);
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 100.0), norm, 1e-6 * norm);
  EXPECT_EQ(ps.grads(), before);  // bit for bit: not even multiplied by 1
  clip_grad_norm_(ps.named(), norm * (1 + 1e-4));
  EXPECT_EQ(ps.grads(), before);
  // At exactly the limit torch's coefficient norm / (norm + 1e-6) is just below 1 and applies.
  clip_grad_norm_(ps.named(), norm);
  EXPECT_NE(ps.grads(), before);
  EXPECT_ALLCLOSE(ps.grads()[2], before[2], 0.0, 1e-6);
}

TEST(ClipGradNorm, SkipsUndefinedGradsAndRejectsBadMaxNorm) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[2].grad = Tensor();
  const double want = reference_norm(ps);  // the two defined ones
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 1e9), want, 1e-6 * want);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_NE(testing::error_message([&] { clip_grad_norm_(ps.named(), bad); }).find("max_norm"),
              std::string::npos)
        << bad;
  EXPECT_THROW(clip_grad_norm_(ps.named(), -1.0), OptionError);  // the command line names it
  ps[0].grad = Tensor(), ps[1].grad = Tensor();
  EXPECT_EQ(clip_grad_norm_(ps.named(), 1.0), 0.0);
}

// Issue 33: 0 means "off" in the library as on the command line (--clip-grad-norm 0), so the
// library's check is the setting's one check: the norm comes back, the gradients stay.
TEST(ClipGradNorm, ZeroMaxNormReturnsTheNormAndLeavesTheGradients) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  const auto before = ps.grads();
  const double want = reference_norm(ps);
  ASSERT_GT(want, 1.0);  // a max_norm of 0 would clip every gradient to zero in torch
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 0.0), want, 1e-6 * want);
  EXPECT_EQ(ps.grads(), before);  // bit for bit
  EXPECT_EQ(clip_grad_norm_({}, 0.0), 0.0);
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedAndSpreadLikeTorch) {
  // torch (error_if_nonfinite=False) multiplies by a NaN coefficient; the caller sees the norm.
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[0].grad.copy_(Tensor::from_vector(std::vector<float>{std::nanf("")}, Shape{1}));
  EXPECT_TRUE(std::isnan(clip_grad_norm_(ps.named(), 1.0)));
  EXPECT_TRUE(std::isnan(ps.grads()[1][0]));
}

}  // namespace
}  // namespace minitrain
