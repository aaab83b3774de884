// Random fills and initialisers on every device: determinism (same seed, same tensor), stream
// layout (value i from counter o + i / V, the offset advancing ceil(n / V)), bounds and moments,
// torch's init bounds, and errors that name the values. On a GPU the fills must equal the CPU's:
// bit for bit for uniforms, within a few ulp for normals (Note [host/device equality]).

#include "kernels/random.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "core/philox.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;

const int64_t kSizes[] = {1, 7, 1000, testing::kLargeSize};  // odd sizes hit partial last blocks
const DType kDTypes[] = {DType::Float32, DType::Float64};

int64_t per_block(DType d) { return d == DType::Float32 ? 4 : 2; }
int64_t counters_for(int64_t n, DType d) { return (n + per_block(d) - 1) / per_block(d); }

// What element i of a uniform / normal draw at `offset` must be, from core/philox.h on the host.
std::vector<double> reference_uniform(int64_t n, DType d, double lo, double hi, uint64_t seed,
                                      uint64_t offset) {
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const philox::Block b = philox::random_block(seed, offset + uint64_t(i / per_block(d)));
    const int lane = int(i % per_block(d));
    if (d == DType::Float32) {
      const float l = float(lo), h = float(hi);
      want[i] = philox::uniform_in(philox::uniform_float(b.w[lane]), l, h - l, h);
    } else {
      want[i] = philox::uniform_in(philox::uniform_double(b.w[2 * lane], b.w[2 * lane + 1]), lo,
                                   hi - lo, hi);
    }
  }
  return want;
}

std::vector<double> reference_normal(int64_t n, DType d, double mean, double stddev, uint64_t seed,
                                     uint64_t offset) {
  std::vector<double> want(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const philox::Block b = philox::random_block(seed, offset + uint64_t(i / per_block(d)));
    const int lane = int(i % per_block(d));
    if (d == DType::Float32) {
      float v[4];
      philox::normal_values(b, float(mean), float(stddev), v);
      want[i] = v[lane];
    } else {
      double v[2];
      philox::normal_values(b, mean, stddev, v);
      want[i] = v[lane];
    }
  }
  return want;
}

class RandomTest : public testing::DeviceTest {};
MT_INSTANTIATE_DEVICE_TEST_SUITE(RandomTest);

TEST_P(RandomTest, SameSeedGivesIdenticalTensorsRunAfterRun) {
  for (DType d : kDTypes) {
    for (int64_t n : kSizes) {
      Generator g1(1234), g2(1234);
      Tensor a = Tensor::empty({n}, d, device()), b = Tensor::empty({n}, d, device());
      uniform_(a, -1, 1, g1);
      uniform_(b, -1, 1, g2);
      ASSERT_EQ(host_values(a), host_values(b)) << dtype_name(d) << " n=" << n;
      normal_(a, 0, 1, g1);
      normal_(b, 0, 1, g2);
      ASSERT_EQ(host_values(a), host_values(b)) << dtype_name(d) << " n=" << n;
    }
  }
}

TEST_P(RandomTest, DifferentSeedsGiveDifferentTensors) {
  // 1 and 1 + 2^32 differ only in the key's high word.
  for (uint64_t other : {uint64_t(2), uint64_t(1) + (uint64_t(1) << 32)}) {
    Generator g1(1), g2(other);
    Tensor a = Tensor::empty({1000}, DType::Float32, device());
    Tensor b = Tensor::empty({1000}, DType::Float32, device());
    uniform_(a, 0, 1, g1);
    uniform_(b, 0, 1, g2);
    const std::vector<double> va = host_values(a), vb = host_values(b);
    int64_t same = 0;
    for (size_t i = 0; i < va.size(); ++i) same += va[i] == vb[i];
    EXPECT_LT(same, 5) << "seed " << other;
  }
}

TEST_P(RandomTest, ConsecutiveDrawsDifferAndAdvanceTheOffsetByCeilNOverV) {
  for (DType d : kDTypes) {
    for (int64_t n : kSizes) {
      Generator g(99);
      Tensor a = Tensor::empty({n}, d, device()), b = Tensor::empty({n}, d, device());
      uniform_(a, 0, 1, g);
      EXPECT_EQ(g.offset(), uint64_t(counters_for(n, d))) << dtype_name(d) << " n=" << n;
      uniform_(b, 0, 1, g);
      EXPECT_EQ(g.offset(), uint64_t(2 * counters_for(n, d))) << dtype_name(d) << " n=" << n;
      EXPECT_NE(host_values(a), host_values(b)) << dtype_name(d) << " n=" << n;
      normal_(a, 0, 1, g);
      EXPECT_EQ(g.offset(), uint64_t(3 * counters_for(n, d))) << dtype_name(d) << " n=" << n;
    }
  }
}

TEST_P(RandomTest, UniformIsThePhiloxStreamBitForBit) {
  // On /cuda this is the GPU against the host's philox.h, exactly.
  for (DType d : kDTypes) {
    for (int64_t n : kSizes) {
      Generator g(0x123456789abcdefull);
      g.advance(5);  // start mid-stream
      Tensor t = Tensor::empty({n}, d, device());
      uniform_(t, -0.5, 2.0, g);
      ASSERT_EQ(host_values(t), reference_uniform(n, d, -0.5, 2.0, g.seed(), 5))
          << dtype_name(d) << " n=" << n;
    }
  }
}

TEST_P(RandomTest, NormalIsThePhiloxBoxMullerStream) {
  // Exact on the CPU (the same code); GPU logf/sinf/cosf may differ in the last ulp or two.
  const bool exact = device().is_cpu();
  for (DType d : kDTypes) {
    for (int64_t n : kSizes) {
      Generator g(77);
      g.advance(3);
      Tensor t = Tensor::empty({n}, d, device());
      normal_(t, 1.5, 0.5, g);
      const std::vector<double> want = reference_normal(n, d, 1.5, 0.5, 77, 3);
      if (exact) {
        ASSERT_EQ(host_values(t), want) << dtype_name(d) << " n=" << n;
      } else {
        const double tol = d == DType::Float32 ? 1e-5 : 1e-12;
        ASSERT_TRUE(testing::allclose(host_values(t), want, tol, tol)) << dtype_name(d);
      }
    }
  }
}

TEST_P(RandomTest, UniformStaysInBoundsWithUniformMoments) {
  const double lo = -2, hi = 3, n = double(1 << 20);
  for (DType d : kDTypes) {
    Generator g(5);
    Tensor t = Tensor::empty({1 << 20}, d, device());
    uniform_(t, lo, hi, g);
    const testing::Moments s = testing::moments(host_values(t));
    EXPECT_GE(s.min, lo) << dtype_name(d);
    EXPECT_LT(s.max, hi) << dtype_name(d);
    EXPECT_LT(s.min, lo + 1e-4 * (hi - lo)) << dtype_name(d);  // fills the whole range
    EXPECT_GT(s.max, hi - 1e-4 * (hi - lo)) << dtype_name(d);
    // mean (lo+hi)/2 and variance (hi-lo)^2/12, each within 5 standard errors
    const double w = hi - lo;
    EXPECT_NEAR(s.mean, (lo + hi) / 2, 5 * w * std::sqrt(1.0 / 12 / n)) << dtype_name(d);
    EXPECT_NEAR(s.var, w * w / 12, 5 * w * w * std::sqrt((1.0 / 80 - 1.0 / 144) / n))
        << dtype_name(d);
  }
}

TEST_P(RandomTest, NormalHasTheRequestedMeanAndStd) {
  const double mean = 3, stddev = 2, n = double(1 << 20);
  for (DType d : kDTypes) {
    Generator g(11);
    Tensor t = Tensor::empty({1 << 20}, d, device());
    normal_(t, mean, stddev, g);
    const testing::Moments s = testing::moments(host_values(t));
    EXPECT_NEAR(s.mean, mean, 5 * stddev / std::sqrt(n)) << dtype_name(d);
    EXPECT_NEAR(s.var, stddev * stddev, 5 * stddev * stddev * std::sqrt(2 / n)) << dtype_name(d);
  }
  // std = 0 is a constant fill.
  Generator g(11);
  Tensor t = Tensor::empty({7}, DType::Float32, device());
  normal_(t, -4, 0, g);
  for (double v : host_values(t)) EXPECT_EQ(v, -4.0);
}

TEST_P(RandomTest, DrawsStartOnBlockBoundariesOfOneStream) {
  // 7 then 9 float32 values use counters 0-1 and 2-4: elements 0-6 and 8-16 of one 17-value draw.
  Generator one(3), two(3);
  Tensor whole = Tensor::empty({17}, DType::Float32, device());
  Tensor first = Tensor::empty({7}, DType::Float32, device());
  Tensor second = Tensor::empty({9}, DType::Float32, device());
  uniform_(whole, 0, 1, one);
  uniform_(first, 0, 1, two);
  uniform_(second, 0, 1, two);
  const std::vector<double> w = host_values(whole), a = host_values(first), b = host_values(second);
  EXPECT_EQ(a, std::vector<double>(w.begin(), w.begin() + 7));
  EXPECT_EQ(b, std::vector<double>(w.begin() + 8, w.end()));
}

TEST_P(RandomTest, FillsOnlyTheNarrowedRows) {
  Tensor x = Tensor::zeros({4, 5}, DType::Float32, device());
  Tensor rows = x.narrow(1, 2);
  Generator g(8);
  uniform_(rows, 1, 2, g);
  const std::vector<double> v = host_values(x);
  for (int64_t i = 0; i < 20; ++i) {
    if (i < 5 || i >= 15)
      EXPECT_EQ(v[i], 0.0) << "element " << i << " is outside the view";
    else
      EXPECT_TRUE(v[i] >= 1.0 && v[i] < 2.0) << "element " << i << " = " << v[i];
  }
  EXPECT_EQ(g.offset(), 3u);  // 10 values
}

TEST_P(RandomTest, EmptyTensorsAreANoOpAndKeepTheOffset) {
  Generator g(1);
  Tensor e = Tensor::empty({0}, DType::Float32, device());
  Tensor w = Tensor::empty({0, 5}, DType::Float64, device());
  EXPECT_NO_THROW(uniform_(e, 0, 1, g));
  EXPECT_NO_THROW(normal_(e, 0, 1, g));
  EXPECT_NO_THROW(kaiming_uniform_(w, g));
  EXPECT_NO_THROW(xavier_uniform_(w, g));
  EXPECT_EQ(g.offset(), 0u);
}

TEST_P(RandomTest, BadArgumentsThrowValueErrorNamingTheValues) {
  Generator g(1);
  Tensor t = Tensor::empty({8}, DType::Float32, device());
  EXPECT_THROW(uniform_(t, 2, 1, g), ValueError);
  std::string msg = testing::error_message([&] { uniform_(t, 2, 1, g); });
  EXPECT_NE(msg.find("lo=2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("hi=1"), std::string::npos) << msg;

  EXPECT_THROW(normal_(t, 0, -1, g), ValueError);
  msg = testing::error_message([&] { normal_(t, 0.5, -1, g); });
  EXPECT_NE(msg.find("std=-1"), std::string::npos) << msg;

  EXPECT_THROW(uniform_(t, 0, NAN, g), ValueError);
  EXPECT_THROW(normal_(t, INFINITY, 1, g), ValueError);
  // Finite in float64, but hi - lo overflows float32.
  msg = testing::error_message([&] { uniform_(t, -3e38, 3e38, g); });
  EXPECT_NE(msg.find("float32"), std::string::npos) << msg;

  EXPECT_THROW(linear_bias_uniform_(t, -3, g), ValueError);
  msg = testing::error_message([&] { linear_bias_uniform_(t, -3, g); });
  EXPECT_NE(msg.find("fan_in=-3"), std::string::npos) << msg;

  EXPECT_THROW(kaiming_uniform_(t, g), ValueError);  // 1-D: no fans
  msg = testing::error_message([&] { kaiming_uniform_(t, g); });
  EXPECT_NE(msg.find("[8]"), std::string::npos) << msg;
  EXPECT_THROW(xavier_uniform_(t, g), ValueError);

  EXPECT_EQ(g.offset(), 0u) << "a rejected draw must not consume the stream";
}

class InitTest : public testing::DeviceTest {};
MT_INSTANTIATE_DEVICE_TEST_SUITE(InitTest);

// max |w| <= bound (as the tensor's type rounds it) and, over many values, close to it.
void expect_bound(const Tensor& w, double bound) {
  const std::vector<double> v = host_values(w);
  double m = 0, sum = 0;
  for (double x : v) {
    m = std::max(m, std::fabs(x));
    sum += x;
  }
  const double b = w.dtype() == DType::Float32 ? double(float(bound)) : bound;
  EXPECT_LE(m, b) << "bound " << bound;
  EXPECT_GT(m, 0.999 * b) << "bound " << bound;
  EXPECT_LT(std::fabs(sum / double(v.size())), 5 * b / std::sqrt(3.0 * double(v.size())));
}

TEST_P(InitTest, KaimingUniformBoundIsOneOverSqrtFanInByDefault) {
  for (DType d : kDTypes) {
    Generator g(2024);
    Tensor w = Tensor::empty({256, 1000}, d, device());  // nn.Linear(1000, 256).weight
    kaiming_uniform_(w, g);
    expect_bound(w, 1 / std::sqrt(1000.0));
    EXPECT_EQ(g.offset(), uint64_t(counters_for(256 * 1000, d)));
  }
  // a = 0 (ReLU gain sqrt(2)): bound sqrt(6 / fan_in); conv-style [8, 3, 5, 5]: fan_in 75.
  Generator g(1);
  Tensor w = Tensor::empty({64, 300}, DType::Float32, device());
  kaiming_uniform_(w, g, 0.0);
  expect_bound(w, std::sqrt(6.0 / 300));
  Tensor conv = Tensor::empty({800, 3, 5, 5}, DType::Float32, device());
  kaiming_uniform_(conv, g);
  expect_bound(conv, 1 / std::sqrt(75.0));
}

TEST_P(InitTest, LinearBiasUniformBoundIsOneOverSqrtFanIn) {
  Generator g(4);
  Tensor b = Tensor::empty({100000}, DType::Float32, device());
  linear_bias_uniform_(b, 1000, g);
  expect_bound(b, 1 / std::sqrt(1000.0));
  // fan_in = 0: bound 0, all zeros, and the stream still advances as for any draw.
  Tensor z = Tensor::empty({7}, DType::Float32, device());
  const uint64_t before = g.offset();
  linear_bias_uniform_(z, 0, g);
  for (double v : host_values(z)) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(g.offset() - before, 2u);
}

TEST_P(InitTest, XavierUniformBoundIsSqrtSixOverFanSum) {
  Generator g(6);
  Tensor w = Tensor::empty({300, 200}, DType::Float64, device());
  xavier_uniform_(w, g);
  expect_bound(w, std::sqrt(6.0 / 500));
  xavier_uniform_(w, g, 2.0);
  expect_bound(w, 2 * std::sqrt(6.0 / 500));
}

TEST(InitFans, FollowTorchRules) {
  Fans f = fan_in_fan_out(Shape{16, 8});
  EXPECT_EQ(f.fan_in, 8);
  EXPECT_EQ(f.fan_out, 16);
  f = fan_in_fan_out(Shape{8, 3, 5, 5});
  EXPECT_EQ(f.fan_in, 75);
  EXPECT_EQ(f.fan_out, 200);
  EXPECT_THROW(fan_in_fan_out(Shape{5}), ValueError);
  EXPECT_THROW(fan_in_fan_out(Shape{}), ValueError);
  const std::string msg = testing::error_message([] { fan_in_fan_out(Shape{5}); });
  EXPECT_NE(msg.find("[5]"), std::string::npos) << msg;
}

TEST(RandomCpu, SameValuesWithOneThreadOrSeveral) {
  const int saved = num_threads();
  std::vector<std::vector<double>> got;
  for (int threads : {1, 2, 4}) {
    set_num_threads(threads);
    Generator g(31);
    Tensor t = Tensor::empty({(1 << 20) + 3});
    normal_(t, 0, 1, g);
    uniform_(t, -1, 1, g);
    got.push_back(host_values(t));
  }
  set_num_threads(saved);
  EXPECT_EQ(got[0], got[1]);
  EXPECT_EQ(got[0], got[2]);
}

TEST(RandomCuda, GpuFillsEqualTheCpuFills) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
  for (DType d : kDTypes) {
    for (int64_t n : kSizes) {
      Generator gc(2718), gg(2718);
      Tensor c = Tensor::empty({n}, d, Device::cpu());
      Tensor k = Tensor::empty({n}, d, Device::cuda(0));
      uniform_(c, -3, 3, gc);
      uniform_(k, -3, 3, gg);
      ASSERT_EQ(host_values(k), host_values(c)) << "uniform " << dtype_name(d) << " n=" << n;
      normal_(c, 0, 1, gc);
      normal_(k, 0, 1, gg);
      const double tol = d == DType::Float32 ? 1e-5 : 1e-12;
      ASSERT_TRUE(testing::allclose(host_values(k), host_values(c), tol, tol))
          << "normal " << dtype_name(d) << " n=" << n;
      EXPECT_EQ(gg.offset(), gc.offset());
    }
  }
}

}  // namespace
}  // namespace minitrain
