// The fused SGD step against a double-precision reference of torch's formula, for every variant,
// on odd sizes (tails of warps, blocks and CPU chunks) and over several steps, on each device.

#include "kernels/optim/sgd_step.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;

// 1 << 17 elements split over two CPU threads (parallel_for's grain is 1 << 15).
const int64_t kSizes[] = {1, 7, 1000, 1 << 17};

Tensor make(const std::vector<double>& v, DType dtype, Device d) {
  if (dtype == DType::Float64) return Tensor::from_vector(v, Shape{int64_t(v.size())}, d);
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), Shape{int64_t(v.size())}, d);
}

// Values representable in both dtypes, so both runs start from exactly the reference's inputs.
std::vector<double> floats(int64_t n, uint32_t seed, double scale = 1.0) {
  std::vector<double> out;
  for (float f : testing::random_floats(n, seed)) out.push_back(double(f) * scale);
  for (double& x : out) x = double(float(x));
  return out;
}

// torch.optim.SGD for one tensor, in double.
void reference_step(std::vector<double>& p, const std::vector<double>& grad,
                    std::vector<double>& buf, const SGDStepArgs& a) {
  for (std::size_t i = 0; i < p.size(); ++i) {
    double g = grad[i] + a.weight_decay * p[i];
    if (a.momentum != 0) {
      buf[i] = a.first_step ? g : a.momentum * buf[i] + (1 - a.dampening) * g;
      g = a.nesterov ? g + a.momentum * buf[i] : buf[i];
    }
    p[i] -= a.lr * g;
  }
}

class SgdStepKernel : public testing::DeviceTest {};

TEST_P(SgdStepKernel, EveryVariantMatchesDoubleReference) {
  struct Variant {
    double momentum, dampening, weight_decay;
    bool nesterov;
  };
  const Variant variants[] = {{0, 0, 0, false},     {0, 0, 0.1, false}, {0.9, 0, 0, false},
                              {0.9, 0.4, 0, false}, {0.9, 0, 0, true},  {0.8, 0.2, 0.1, false},
                              {0.7, 0, 0.1, true}};
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // float32: a few roundings a step, 3 steps, |p| < 2 (Note [optimizer test tolerance] in
    // tests/optim/optim_test_util.h); float64: rounding order only.
    const double tol = dtype == DType::Float32 ? 2e-6 : 1e-13;
    for (const Variant& v : variants) {
      for (int64_t n : kSizes) {
        if (testing::over_size_cap(n)) continue;
        SCOPED_TRACE(::testing::Message()
                     << dtype << " n=" << n << " momentum=" << v.momentum << " dampening="
                     << v.dampening << " wd=" << v.weight_decay << " nesterov=" << v.nesterov);
        std::vector<double> want = floats(n, 1), buf_want(size_t(n), 0.0);
        Tensor p = make(want, dtype, device());
        Tensor buf = v.momentum != 0 ? Tensor::empty(Shape{n}, dtype, device()) : Tensor();
        for (int step = 0; step < 3; ++step) {
          SGDStepArgs a;
          a.lr = 0.1, a.momentum = v.momentum, a.dampening = v.dampening;
          a.weight_decay = v.weight_decay, a.nesterov = v.nesterov, a.first_step = step == 0;
          const std::vector<double> g = floats(n, 10 + step, step == 1 ? 0.1 : 1.0);
          sgd_step(p, make(g, dtype, device()), buf, a);
          reference_step(want, g, buf_want, a);
        }
        ASSERT_GT(testing::host_max_abs(p), 0.0);
        ASSERT_ALLCLOSE(host_values(p), want, tol, tol);
        if (v.momentum != 0) {
          ASSERT_ALLCLOSE(host_values(buf), buf_want, tol, tol);
        }
      }
    }
  }
}

TEST_P(SgdStepKernel, FirstStepOverwritesTheBufferWithTheGradient) {
  const int64_t n = 1000;
  Tensor p = make(floats(n, 3), DType::Float32, device());
  const std::vector<double> g = floats(n, 4);
  Tensor buf = make(std::vector<double>(size_t(n), std::nan("")), DType::Float32, device());
  SGDStepArgs a;
  a.momentum = 0.9, a.dampening = 0.5, a.first_step = true;
  sgd_step(p, make(g, DType::Float32, device()), buf, a);
  EXPECT_EQ(host_values(buf), g);            // g exactly: no dampening, old contents never read
  EXPECT_LT(testing::host_max_abs(p), 2.0);  // finite
}

TEST_P(SgdStepKernel, ChecksOperandsBeforeWriting) {
  Tensor p = make(floats(7, 5), DType::Float32, device());
  const std::vector<double> before = host_values(p);
  Tensor g = make(floats(7, 6), DType::Float32, device());
  Tensor none;
  SGDStepArgs plain;
  sgd_step(p, g, none, plain);  // no momentum: the buffer may be undefined
  EXPECT_NE(host_values(p), before);

  SGDStepArgs with_momentum;
  with_momentum.momentum = 0.9;
  EXPECT_THROW(sgd_step(p, g, none, with_momentum), Error);
  Tensor short_buf = Tensor::empty(Shape{6}, DType::Float32, device());
  const std::string msg = testing::error_message([&] { sgd_step(p, g, short_buf, with_momentum); });
  EXPECT_NE(msg.find("momentum_buf"), std::string::npos) << msg;
  Tensor g64 = make(floats(7, 6), DType::Float64, device());
  EXPECT_THROW(sgd_step(p, g64, none, plain), DTypeError);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(SgdStepKernel);

// ---- CPU only ----

// Note [AVX2 clones] (kernels/optim/optimizer_step.cpp): the generic CPU loop, an AVX2 clone where
// the CPU has it, must make the operations of sgd_update itself, element by element in this
// file's own (baseline) code: every variant, odd sizes (vector tails), several steps, bit for bit.
TEST(SgdStepCpu, ClonedLoopIsTheScalarFormulaBitForBit) {
  for (double wd : {0.0, 0.05})
    for (double momentum : {0.0, 0.9})
      for (bool nesterov : {false, true})
        for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1001}, int64_t{70001}}) {
          if (nesterov && momentum == 0.0) continue;
          std::vector<float> p = testing::random_floats(n, 11), buf(size_t(n), 0.f);
          std::vector<float> rp = p, rbuf = buf;
          for (int t = 1; t <= 3; ++t) {
            SGDStepArgs args;
            args.lr = 0.05, args.weight_decay = wd, args.momentum = momentum;
            args.dampening = nesterov ? 0.0 : 0.2, args.nesterov = nesterov;
            args.first_step = t == 1;
            const std::vector<float> g = testing::random_floats(n, 20 + uint32_t(t), -3.f, 3.f);
            optimizer_step_cpu<SgdStep, float>(p.data(), g.data(),
                                               {momentum > 0 ? buf.data() : nullptr}, n, args);
            const SgdCoeffs<float> c = SgdStep::coeffs<float>(args);
            SgdStep::dispatch(args, [&](auto variant) {
              using V = decltype(variant);
              for (int64_t i = 0; i < n; ++i) {
                volatile float vol_p = rp[i];  // keep this loop scalar and apart from the kernel
                float pi = vol_p;
                sgd_update<V>(pi, g[i], rbuf[i], c);
                rp[i] = pi;
              }
            });
          }
          ASSERT_GT(testing::host_max_abs(Tensor::from_vector(p, Shape{n})), 0.0);
          const std::string what = "n=" + std::to_string(n) + " wd=" + std::to_string(wd) +
                                   " momentum=" + std::to_string(momentum) +
                                   " nesterov=" + std::to_string(nesterov);
          EXPECT_TRUE(std::memcmp(p.data(), rp.data(), size_t(n) * 4) == 0) << what;
          if (momentum > 0) {
            EXPECT_TRUE(std::memcmp(buf.data(), rbuf.data(), size_t(n) * 4) == 0) << what;
          }
        }
}

}  // namespace
}  // namespace minitrain
