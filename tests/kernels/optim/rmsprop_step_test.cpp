// The fused RMSprop step against a double-precision reference of torch's formula, for every
// variant (weight decay, centered, momentum), on odd sizes and over several steps, on each device;
// the device against its CPU twin; and operand checks.

#include "kernels/optim/optimizer_step.h"

#include <gtest/gtest.h>

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

const int64_t kSizes[] = {1, 7, 1001, testing::kLargeSize / 8 + 3};

// RMSprop is the row RmspropStep of the generic step (kernels/optim/optimizer_step.h).
void rmsprop_step(Tensor& p, const Tensor& g, Tensor& square_avg, Tensor& grad_avg,
                  Tensor& momentum_buf, const RMSpropStepArgs& a) {
  optimizer_step<RmspropStep>(p, g, {&square_avg, &grad_avg, &momentum_buf}, a);
}

struct RefState {
  std::vector<double> p, sq, ga, buf;
};

// torch.optim.RMSprop for one tensor, in double, from the documented formulas.
void reference_step(RefState& s, const std::vector<double>& grad, const RMSpropStepArgs& a) {
  for (std::size_t i = 0; i < s.p.size(); ++i) {
    const double g = grad[i] + a.weight_decay * s.p[i];
    s.sq[i] = a.alpha * s.sq[i] + (1 - a.alpha) * g * g;
    double avg;
    if (a.centered) {
      s.ga[i] = a.alpha * s.ga[i] + (1 - a.alpha) * g;
      avg = std::sqrt(s.sq[i] - s.ga[i] * s.ga[i]) + a.eps;
    } else {
      avg = std::sqrt(s.sq[i]) + a.eps;
    }
    if (a.momentum > 0) {
      s.buf[i] = a.momentum * s.buf[i] + g / avg;
      s.p[i] -= a.lr * s.buf[i];
    } else {
      s.p[i] -= a.lr * g / avg;
    }
  }
}

class RMSpropStepKernel : public testing::DeviceTest {};

TEST_P(RMSpropStepKernel, EveryVariantMatchesDoubleReference) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // Note [optimizer test tolerance] in tests/optim/optim_test_util.h.
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-12;
    // The momentum buffer sums g / avg, which multiplies the float32 rounding of g = grad + wd p
    // (where the two nearly cancel) by 1 / avg, up to 1 / eps: measured 2.2e-6 at worst over
    // 131075 elements with eps 1e-3, so 2e-5 for it (the parameters stay within tol: lr = 0.01
    // scales the buffer's error down).
    const double buf_tol = dtype == DType::Float32 ? 2e-5 : 1e-12;
    for (double wd : {0.0, 0.1})
      for (bool centered : {false, true})
        for (double momentum : {0.0, 0.9})
          for (int64_t n : kSizes) {
            SCOPED_TRACE(::testing::Message() << dtype << " n=" << n << " wd=" << wd << " centered="
                                              << centered << " momentum=" << momentum);
            RMSpropStepArgs a;
            a.lr = 0.01, a.alpha = 0.9, a.eps = dtype == DType::Float32 ? 1e-3 : 1e-8;
            a.weight_decay = wd, a.momentum = momentum, a.centered = centered;
            const std::vector<double> zeros(size_t(n), 0.0);
            RefState want{float_exact_doubles(n, 1), zeros, zeros, zeros};
            Tensor p = vector_tensor(want.p, dtype, device()),
                   sq = vector_tensor(zeros, dtype, device());
            Tensor ga = centered ? vector_tensor(zeros, dtype, device()) : Tensor();
            Tensor buf = momentum > 0 ? vector_tensor(zeros, dtype, device()) : Tensor();
            for (int t = 1; t <= 4; ++t) {
              const std::vector<double> g = float_exact_doubles(n, 20 + t, t == 3 ? 0.1 : 1.0);
              rmsprop_step(p, vector_tensor(g, dtype, device()), sq, ga, buf, a);
              reference_step(want, g, a);
            }
            ASSERT_GT(testing::host_max_abs(p), 0.0);
            ASSERT_ALLCLOSE(host_values(p), want.p, tol, tol);
            ASSERT_ALLCLOSE(host_values(sq), want.sq, tol, tol);
            if (centered) {
              ASSERT_ALLCLOSE(host_values(ga), want.ga, tol, tol);
            }
            if (momentum > 0) {
              ASSERT_ALLCLOSE(host_values(buf), want.buf, buf_tol, buf_tol);
            }
          }
  }
}

// The device's kernel against the CPU loop: the same per-element math (optimizer_math.h), so on
// emulated GPUs the same bits; a real GPU may contract a multiply-add (nvcc's default), so there
// within a float32 rounding or two. Odd sizes and an offset view hit the packed and scalar paths.
TEST_P(RMSpropStepKernel, DeviceEqualsCpuTwin) {
  if (!device().is_cuda()) GTEST_SKIP() << "compares a CUDA device with the CPU";
  for (bool centered : {false, true})
    for (double momentum : {0.0, 0.5})
      for (int64_t n : {int64_t{5}, int64_t{4099}}) {
        RMSpropStepArgs a;
        a.lr = 0.02, a.alpha = 0.95, a.eps = 1e-6, a.weight_decay = 0.01;
        a.momentum = momentum, a.centered = centered;
        const std::vector<double> zeros(size_t(n), 0.0);
        Tensor p[2], sq[2], ga[2], buf[2];
        const Device devices[2] = {device(), Device::cpu()};
        for (int d = 0; d < 2; ++d) {
          p[d] = vector_tensor(float_exact_doubles(n, 3), DType::Float32, devices[d]);
          sq[d] = vector_tensor(zeros, DType::Float32, devices[d]);
          if (centered) ga[d] = vector_tensor(zeros, DType::Float32, devices[d]);
          if (momentum > 0) buf[d] = vector_tensor(zeros, DType::Float32, devices[d]);
          for (int t = 1; t <= 3; ++t)
            rmsprop_step(p[d],
                         vector_tensor(float_exact_doubles(n, 40 + t), DType::Float32, devices[d]),
                         sq[d], ga[d], buf[d], a);
        }
        const std::string what = "n=" + std::to_string(n) +
                                 " centered=" + std::to_string(centered) +
                                 " momentum=" + std::to_string(momentum);
        ASSERT_GT(testing::host_max_abs(p[0]), 0.0);
        if (MINITRAIN_CUDA_EMULATED) {
          EXPECT_EQ(host_values(p[0]), host_values(p[1])) << what;
          EXPECT_EQ(host_values(sq[0]), host_values(sq[1])) << what;
          if (centered) {
            EXPECT_EQ(host_values(ga[0]), host_values(ga[1])) << what;
          }
          if (momentum > 0) {
            EXPECT_EQ(host_values(buf[0]), host_values(buf[1])) << what;
          }
        } else {
          EXPECT_ALLCLOSE(host_values(p[0]), host_values(p[1]), 1e-6, 1e-6) << what;
        }
      }
}

TEST_P(RMSpropStepKernel, ChecksOperandsBeforeWriting) {
  const std::vector<double> zeros(7, 0.0);
  Tensor p = vector_tensor(float_exact_doubles(7, 2), DType::Float32, device());
  Tensor g = vector_tensor(float_exact_doubles(7, 3), DType::Float32, device());
  Tensor sq = vector_tensor(zeros, DType::Float32, device());
  Tensor none;
  const std::vector<double> before = host_values(p);
  RMSpropStepArgs centered;
  centered.centered = true;
  EXPECT_THROW(rmsprop_step(p, g, sq, none, none, centered), Error);  // no grad_avg
  RMSpropStepArgs momentum;
  momentum.momentum = 0.9;
  Tensor short_buf = vector_tensor(std::vector<double>(6, 0.0), DType::Float32, device());
  const std::string msg =
      testing::error_message([&] { rmsprop_step(p, g, sq, none, short_buf, momentum); });
  EXPECT_NE(msg.find("momentum_buf"), std::string::npos) << msg;
  EXPECT_EQ(host_values(p), before);
  rmsprop_step(p, g, sq, none, none, RMSpropStepArgs{});
  EXPECT_NE(host_values(p), before);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(RMSpropStepKernel);

// ---- CPU only ----

// Note [AVX2 clones] (kernels/optim/optimizer_step.cpp): the generic CPU loop, an AVX2 clone where
// the CPU has it, must make the operations of rmsprop_update itself, element by element in this
// file's own (baseline) code: every variant, odd sizes (vector tails), several steps, bit for bit.
TEST(RMSpropStepCpu, ClonedLoopIsTheScalarFormulaBitForBit) {
  for (double wd : {0.0, 0.05})
    for (bool centered : {false, true})
      for (double momentum : {0.0, 0.9})
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{70001}}) {
          std::vector<float> p = testing::random_floats(n, 11), sq(size_t(n), 0.f),
                             ga(size_t(n), 0.f), buf(size_t(n), 0.f);
          std::vector<float> rp = p, rsq = sq, rga = ga, rbuf = buf;
          RMSpropStepArgs args;
          args.lr = 0.01, args.alpha = 0.9, args.eps = 1e-6;
          args.weight_decay = wd, args.centered = centered, args.momentum = momentum;
          for (int t = 1; t <= 3; ++t) {
            const std::vector<float> g = testing::random_floats(n, 20 + uint32_t(t), -3.f, 3.f);
            optimizer_step_cpu<RmspropStep, float>(
                p.data(), g.data(),
                {sq.data(), centered ? ga.data() : nullptr, momentum > 0 ? buf.data() : nullptr}, n,
                args);
            const RmspropCoeffs<float> c = RmspropStep::coeffs<float>(args);
            RmspropStep::dispatch(args, [&](auto variant) {
              using V = decltype(variant);
              for (int64_t i = 0; i < n; ++i) {
                volatile float vol_p = rp[i];  // keep this loop scalar and apart from the kernel
                float pi = vol_p;
                rmsprop_update<V>(pi, g[i], rsq[i], rga[i], rbuf[i], c);
                rp[i] = pi;
              }
            });
          }
          ASSERT_GT(testing::host_max_abs(Tensor::from_vector(p, Shape{n})), 0.0);
          const std::string what = "n=" + std::to_string(n) + " wd=" + std::to_string(wd) +
                                   " centered=" + std::to_string(centered) +
                                   " momentum=" + std::to_string(momentum);
          EXPECT_TRUE(std::memcmp(p.data(), rp.data(), size_t(n) * 4) == 0) << what;
          EXPECT_TRUE(std::memcmp(sq.data(), rsq.data(), size_t(n) * 4) == 0) << what;
          if (centered) {
            EXPECT_TRUE(std::memcmp(ga.data(), rga.data(), size_t(n) * 4) == 0) << what;
          }
          if (momentum > 0) {
            EXPECT_TRUE(std::memcmp(buf.data(), rbuf.data(), size_t(n) * 4) == 0) << what;
          }
        }
}

}  // namespace
}  // namespace minitrain
