// The fused Adam / AdamW step against a double-precision reference of torch's formula, for every
// variant, on odd sizes and over several steps, on each device; and the host-side factors.

#include "kernels/optim/adam_step.h"
#include "kernels/optim/optimizer_math.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::float_exact_doubles;
using testing::host_values;
using testing::vector_tensor;

const int64_t kSizes[] = {1, 7, 1000, testing::kLargeSize / 8};

struct RefState {
  std::vector<double> p, m, v, vmax;
};

// torch.optim.Adam / AdamW for one tensor at step t, in double, from the documented formulas.
void reference_step(RefState& s, const std::vector<double>& grad, double lr, double beta1,
                    double beta2, double eps, double wd, bool decoupled, bool amsgrad, int t) {
  const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    double g = grad[i];
    if (decoupled)
      s.p[i] *= 1 - lr * wd;
    else
      g += wd * s.p[i];
    s.m[i] = beta1 * s.m[i] + (1 - beta1) * g;
    s.v[i] = beta2 * s.v[i] + (1 - beta2) * g * g;
    if (amsgrad) s.vmax[i] = std::max(s.vmax[i], s.v[i]);
    const double v_hat = amsgrad ? s.vmax[i] : s.v[i];
    s.p[i] -= lr / bc1 * s.m[i] / (std::sqrt(v_hat) / std::sqrt(bc2) + eps);
  }
}

TEST(AdamStepArgs, PrecomputesTorchsStepFactorsOnTheHost) {
  const AdamStepArgs a1 = adam_step_args(0.01, 0.9, 0.999, 1e-8, 0.0, false, false, 1);
  EXPECT_DOUBLE_EQ(a1.step_size, 0.01 / (1 - 0.9));
  EXPECT_DOUBLE_EQ(a1.bias_correction2_sqrt, std::sqrt(1 - 0.999));
  EXPECT_EQ(a1.decay, AdamDecay::None);
  const AdamStepArgs a3 = adam_step_args(0.01, 0.9, 0.999, 1e-8, 0.1, true, true, 3);
  EXPECT_DOUBLE_EQ(a3.step_size, 0.01 / (1 - 0.9 * 0.9 * 0.9));
  EXPECT_DOUBLE_EQ(a3.bias_correction2_sqrt, std::sqrt(1 - 0.999 * 0.999 * 0.999));
  EXPECT_EQ(a3.decay, AdamDecay::Decoupled);
  EXPECT_DOUBLE_EQ(a3.decay_factor, 1 - 0.01 * 0.1);
  EXPECT_TRUE(a3.amsgrad);
  EXPECT_EQ(adam_step_args(0.01, 0.9, 0.999, 1e-8, 0.1, false, false, 2).decay, AdamDecay::L2);
  EXPECT_THROW(adam_step_args(0.01, 0.9, 0.999, 1e-8, 0.0, false, false, 0), ValueError);
}

class AdamStepKernel : public testing::DeviceTest {};

TEST_P(AdamStepKernel, EveryVariantMatchesDoubleReference) {
  const double lr = 0.05, beta1 = 0.8, beta2 = 0.9;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // Note [optimizer test tolerance] in tests/optim/optim_test_util.h.
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
    const double eps = dtype == DType::Float32 ? 1e-3 : 1e-8;
    for (bool decoupled : {false, true}) {
      for (double wd : {0.0, 0.1}) {
        for (bool amsgrad : {false, true}) {
          for (int64_t n : kSizes) {
            SCOPED_TRACE(::testing::Message() << dtype << " n=" << n << " decoupled=" << decoupled
                                              << " wd=" << wd << " amsgrad=" << amsgrad);
            const std::vector<double> zeros(size_t(n), 0.0);
            RefState want{float_exact_doubles(n, 1), zeros, zeros, zeros};
            Tensor p = vector_tensor(want.p, dtype, device());
            Tensor m = vector_tensor(zeros, dtype, device()),
                   v = vector_tensor(zeros, dtype, device());
            Tensor vmax = amsgrad ? vector_tensor(zeros, dtype, device()) : Tensor();
            for (int t = 1; t <= 4; ++t) {
              // Shrinking gradients (1, 0.2, 0.04, 1): v falls, so amsgrad's max matters.
              const std::vector<double> g =
                  float_exact_doubles(n, 20 + t, t == 4 ? 1.0 : std::pow(0.2, t - 1));
              adam_step(p, vector_tensor(g, dtype, device()), m, v, vmax,
                        adam_step_args(lr, beta1, beta2, eps, wd, decoupled, amsgrad, t));
              reference_step(want, g, lr, beta1, beta2, eps, wd, decoupled, amsgrad, t);
            }
            ASSERT_GT(testing::host_max_abs(p), 0.0);
            ASSERT_ALLCLOSE(host_values(p), want.p, tol, tol);
            ASSERT_ALLCLOSE(host_values(m), want.m, tol, tol);
            ASSERT_ALLCLOSE(host_values(v), want.v, tol, tol);
            if (amsgrad) {
              ASSERT_ALLCLOSE(host_values(vmax), want.vmax, tol, tol);
            }
          }
        }
      }
    }
  }
}

TEST_P(AdamStepKernel, AmsgradKeepsTheLargestSecondMoment) {
  const int64_t n = 7;
  Tensor p = vector_tensor(float_exact_doubles(n, 2), DType::Float32, device());
  const std::vector<double> zeros(size_t(n), 0.0);
  Tensor m = vector_tensor(zeros, DType::Float32, device()),
         v = vector_tensor(zeros, DType::Float32, device());
  Tensor vmax = vector_tensor(zeros, DType::Float32, device());
  adam_step(p, vector_tensor(float_exact_doubles(n, 3), DType::Float32, device()), m, v, vmax,
            adam_step_args(0.01, 0.9, 0.5, 1e-8, 0, false, true, 1));
  const std::vector<double> after_big = host_values(vmax);
  ASSERT_EQ(after_big, host_values(v));
  adam_step(p, vector_tensor(zeros, DType::Float32, device()), m, v, vmax,
            adam_step_args(0.01, 0.9, 0.5, 1e-8, 0, false, true, 2));
  EXPECT_EQ(host_values(vmax), after_big);  // v halved; the max stays
  const std::vector<double> vs = host_values(v);
  for (int64_t i = 0; i < n; ++i) EXPECT_LT(vs[size_t(i)], after_big[size_t(i)]);
}

TEST_P(AdamStepKernel, ChecksOperandsBeforeWriting) {
  const std::vector<double> zeros(7, 0.0);
  Tensor p = vector_tensor(float_exact_doubles(7, 2), DType::Float32, device());
  Tensor g = vector_tensor(float_exact_doubles(7, 3), DType::Float32, device());
  Tensor m = vector_tensor(zeros, DType::Float32, device()),
         v = vector_tensor(zeros, DType::Float32, device());
  Tensor none;
  const std::vector<double> before = host_values(p);
  EXPECT_THROW(adam_step(p, g, m, v, none, adam_step_args(0.1, 0.9, 0.99, 1e-8, 0, false, true, 1)),
               Error);  // amsgrad without its buffer
  Tensor short_v = vector_tensor(std::vector<double>(6, 0.0), DType::Float32, device());
  const std::string msg = testing::error_message([&] {
    adam_step(p, g, m, short_v, none, adam_step_args(0.1, 0.9, 0.99, 1e-8, 0, false, false, 1));
  });
  EXPECT_NE(msg.find("exp_avg_sq"), std::string::npos) << msg;
  EXPECT_EQ(host_values(p), before);
  adam_step(p, g, m, v, none, adam_step_args(0.1, 0.9, 0.99, 1e-8, 0, false, false, 1));
  EXPECT_NE(host_values(p), before);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(AdamStepKernel);

// ---- CPU only ----

// Note [AVX2 clones]: on a CPU with AVX2 adam_step_cpu runs a clone of its loop compiled for AVX2;
// it must make the same IEEE operations as the baseline loop (no FMA contraction, no reordering).
// The baseline here is adam_update itself, element by element in this file's own (baseline)
// code: every variant, odd sizes (vector tails), several steps, bit for bit.
TEST(AdamStepCpu, ClonedLoopIsTheScalarFormulaBitForBit) {
  for (bool decoupled : {false, true})
    for (double wd : {0.0, 0.05})
      for (bool amsgrad : {false, true})
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{70001}}) {
          std::vector<float> p = testing::random_floats(n, 11), m(size_t(n), 0.f),
                             v(size_t(n), 0.f), vmax(size_t(n), 0.f);
          std::vector<float> rp = p, rm = m, rv = v, rvmax = vmax;
          for (int t = 1; t <= 3; ++t) {
            const std::vector<float> g = testing::random_floats(n, 20 + uint32_t(t), -3.f, 3.f);
            const AdamStepArgs args =
                adam_step_args(0.01, 0.9, 0.999, 1e-8, wd, decoupled, amsgrad, t);
            adam_step_cpu<float>(p.data(), g.data(), m.data(), v.data(),
                                 amsgrad ? vmax.data() : nullptr, n, args);
            const AdamCoeffs<float> c = adam_coeffs<float>(args);
            dispatch_adam_variant(args.decay, amsgrad, [&](auto variant) {
              using V = decltype(variant);
              for (int64_t i = 0; i < n; ++i) {
                volatile float vol_p = rp[i];  // keep this loop scalar and apart from the kernel
                float pi = vol_p;
                adam_update<V>(pi, g[i], rm[i], rv[i], rvmax[i], c);
                rp[i] = pi;
              }
            });
          }
          ASSERT_GT(testing::host_max_abs(Tensor::from_vector(p, Shape{n})), 0.0);
          const std::string what =
              "n=" + std::to_string(n) + " decoupled=" + std::to_string(decoupled) +
              " wd=" + std::to_string(wd) + " amsgrad=" + std::to_string(amsgrad);
          EXPECT_TRUE(std::memcmp(p.data(), rp.data(), size_t(n) * 4) == 0) << what;
          EXPECT_TRUE(std::memcmp(m.data(), rm.data(), size_t(n) * 4) == 0) << what;
          EXPECT_TRUE(std::memcmp(v.data(), rv.data(), size_t(n) * 4) == 0) << what;
          if (amsgrad) {
            EXPECT_TRUE(std::memcmp(vmax.data(), rvmax.data(), size_t(n) * 4) == 0) << what;
          }
        }
}

}  // namespace
}  // namespace minitrain
