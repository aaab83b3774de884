// Philox4x32 against Random123's published known answers, the stream layout, the word-to-float
// conversions at their edges, and the moments of uniforms and Box-Muller normals. The inputs are
// fixed, so each statistical tolerance (5 standard errors) is a fixed, non-flaky bound.

#include "core/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using philox::Block;
using philox::Key;

struct KnownAnswer {
  Block ctr;
  Key key;
  Block want;
};

void expect_block_eq(const Block& got, const Block& want) {
  for (int j = 0; j < 4; ++j)
    EXPECT_EQ(got.w[j], want.w[j])
        << "word " << j << std::hex << ": got 0x" << got.w[j] << ", want 0x" << want.w[j];
}

// Random123's tests/kat_vectors, as quoted by D. E. Shaw Research's Random123-Boost
// (libs/random/test/test_philox.cpp, "cut-and-pasted from the kat_vectors file"): counter words,
// key words, output words.
const KnownAnswer kKat10[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
};
const KnownAnswer kKat7[] = {
    {{{0x00000000, 0x00000000, 0x00000000, 0x00000000}},
     {{0x00000000, 0x00000000}},
     {{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}}},
    {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
     {{0xffffffff, 0xffffffff}},
     {{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}}},
    {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
     {{0xa4093822, 0x299f31d0}},
     {{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}}},
};

TEST(Philox, TenRoundsMatchRandom123KnownAnswers) {
  for (const KnownAnswer& k : kKat10) expect_block_eq(philox::philox4x32<10>(k.ctr, k.key), k.want);
}

TEST(Philox, SevenRoundsMatchRandom123KnownAnswers) {
  // A second round count pins the key schedule: a bump in the wrong place passes one but not both.
  for (const KnownAnswer& k : kKat7) expect_block_eq(philox::philox4x32<7>(k.ctr, k.key), k.want);
}

TEST(Philox, RandomBlockPutsSeedInTheKeyAndOffsetInTheLowCounterWords) {
  expect_block_eq(philox::random_block(0, 0), kKat10[0].want);
  const uint64_t seed = 0x299f31d0a4093822ull, counter = 0x85a308d3243f6a88ull;
  expect_block_eq(
      philox::random_block(seed, counter),
      philox::philox4x32<10>(Block{{0x243f6a88, 0x85a308d3, 0, 0}}, Key{{0xa4093822, 0x299f31d0}}));
  // Seeds that differ only in their high word, counters only in theirs, give other blocks.
  const Block a = philox::random_block(1, 5), b = philox::random_block(1 + (1ull << 32), 5),
              c = philox::random_block(1, 5 + (1ull << 32));
  EXPECT_NE(a.w[0], b.w[0]);
  EXPECT_NE(a.w[0], c.w[0]);
}

TEST(Philox, WordToFloatConversionsAreExactAtTheirEdges) {
  EXPECT_EQ(philox::uniform_float(0u), 0.0f);
  EXPECT_EQ(philox::uniform_float(0xffu), 0.0f);  // the low 8 bits do not reach a float
  EXPECT_EQ(philox::uniform_float(0xffffffffu), 1.0f - 0x1p-24f);
  EXPECT_LT(philox::uniform_float(0xffffffffu), 1.0f);
  EXPECT_EQ(philox::uniform_float(0x80000000u), 0.5f);
  EXPECT_EQ(philox::uniform_float_nonzero(0u), 0x1p-24f);
  EXPECT_EQ(philox::uniform_float_nonzero(0xffffffffu), 1.0f);

  EXPECT_EQ(philox::uniform_double(0u, 0u), 0.0);
  EXPECT_EQ(philox::uniform_double(0xffffffffu, 0xffffffffu), 1.0 - 0x1p-53);
  EXPECT_EQ(philox::uniform_double(0x80000000u, 0u), 0.5);
  EXPECT_EQ(philox::uniform_double(0u, 0x800u), 0x1p-53);  // the low word's bits count too
  EXPECT_EQ(philox::uniform_double_nonzero(0u, 0u), 0x1p-53);
  EXPECT_EQ(philox::uniform_double_nonzero(0xffffffffu, 0xffffffffu), 1.0);
}

TEST(Philox, UniformInExcludesTheUpperBound) {
  // 1 + (1 - 2^-24) rounds to 2 in float32: the one case that would land on hi becomes lo.
  const float u = philox::uniform_float(0xffffffffu);
  EXPECT_EQ(philox::uniform_in(u, 1.0f, 1.0f, 2.0f), 1.0f);
  EXPECT_EQ(philox::uniform_in(0.5f, -1.0f, 2.0f, 1.0f), 0.0f);
  EXPECT_EQ(philox::uniform_in(u, 3.0f, 0.0f, 3.0f), 3.0f);  // lo == hi
  const double ud = philox::uniform_double(0xffffffffu, 0xffffffffu);
  EXPECT_LT(philox::uniform_in(ud, -1.0, 2.0, 1.0), 1.0);
}

using testing::Moments;
using testing::moments;

constexpr int64_t kSamples = int64_t(1) << 20;

TEST(Philox, UniformFloatsAndDoublesHaveUniformMoments) {
  std::vector<double> f, d;
  for (uint64_t c = 0; f.size() < size_t(kSamples); ++c) {
    float vf[4];
    double vd[2];
    const Block b = philox::random_block(42, c);
    philox::uniform_values(b, 0.0f, 1.0f, 1.0f, vf);
    philox::uniform_values(b, 0.0, 1.0, 1.0, vd);
    f.insert(f.end(), vf, vf + 4);
    d.insert(d.end(), vd, vd + 2);
  }
  // U(0,1): mean 1/2 (sd sqrt(1/12 / n)), variance 1/12 (sd sqrt((1/80 - 1/144) / n)).
  for (const auto* v : {&f, &d}) {
    const Moments m = moments(*v);
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
    EXPECT_NEAR(m.mean, 0.5, 5 * std::sqrt(1.0 / 12 / double(v->size())));
    EXPECT_NEAR(m.var, 1.0 / 12, 5 * std::sqrt((1.0 / 80 - 1.0 / 144) / double(v->size())));
    EXPECT_LT(m.min, 1e-4);  // 1M values spread over the whole interval
    EXPECT_GT(m.max, 1 - 1e-4);
  }
}

// N(0,1) sample checks: mean (sd 1/sqrt(n)), variance (sd sqrt(2/n)), fourth moment 3
// (sd sqrt(96/n)), and the share within one sigma, 0.6827 (sd sqrt(p(1-p)/n)).
void expect_standard_normal(const std::vector<double>& z) {
  const double n = double(z.size());
  const Moments m = moments(z);
  double m4 = 0, within = 0;
  for (double x : z) {
    m4 += x * x * x * x;
    within += std::fabs(x) < 1.0 ? 1.0 : 0.0;
  }
  m4 /= n;
  within /= n;
  EXPECT_LT(std::fabs(m.mean), 5 / std::sqrt(n));
  EXPECT_NEAR(m.var, 1.0, 5 * std::sqrt(2 / n));
  EXPECT_NEAR(m4, 3.0, 5 * std::sqrt(96 / n));
  const double p = std::erf(1 / std::sqrt(2.0));
  EXPECT_NEAR(within, p, 5 * std::sqrt(p * (1 - p) / n));
  EXPECT_TRUE(std::isfinite(m.min) && std::isfinite(m.max));
}

TEST(Philox, NormalFloatsHaveStandardNormalMoments) {
  std::vector<double> z;
  for (uint64_t c = 0; z.size() < size_t(kSamples); ++c) {
    float v[4];
    philox::normal_values(philox::random_block(7, c), 0.0f, 1.0f, v);
    z.insert(z.end(), v, v + 4);
  }
  expect_standard_normal(z);
}

TEST(Philox, NormalDoublesHaveStandardNormalMoments) {
  std::vector<double> z;
  for (uint64_t c = 0; z.size() < size_t(kSamples); ++c) {
    double v[2];
    philox::normal_values(philox::random_block(7, c), 0.0, 1.0, v);
    z.insert(z.end(), v, v + 2);
  }
  expect_standard_normal(z);
}

TEST(Philox, BoxMullerPairsAreUncorrelated) {
  // The cos and sin halves of one pair are uncorrelated (though dependent through r).
  double sxy = 0;
  const int64_t pairs = kSamples / 2;
  for (int64_t c = 0; c < pairs / 2; ++c) {
    float v[4];
    philox::normal_values(philox::random_block(9, uint64_t(c)), 0.0f, 1.0f, v);
    sxy += double(v[0]) * v[1] + double(v[2]) * v[3];
  }
  EXPECT_LT(std::fabs(sxy / double(pairs)), 5 / std::sqrt(double(pairs)));
}

TEST(Philox, BoxMullerIsFiniteAtTheExtremes) {
  float z0, z1;
  // u1 = 2^-24, the smallest (0, 1] value: the largest radius, sqrt(48 ln 2) = 5.77.
  philox::box_muller(philox::uniform_float_nonzero(0u), 0.0f, z0, z1);
  EXPECT_TRUE(std::isfinite(z0));
  EXPECT_NEAR(z0, std::sqrt(48 * std::log(2.0)), 1e-5);
  EXPECT_EQ(z1, 0.0f);
  // u1 = 1: radius 0.
  philox::box_muller(philox::uniform_float_nonzero(0xffffffffu), 0.3f, z0, z1);
  EXPECT_EQ(z0, 0.0f);
  EXPECT_EQ(z1, 0.0f);
  double d0, d1;
  philox::box_muller(philox::uniform_double_nonzero(0u, 0u), 0.25, d0, d1);
  EXPECT_NEAR(d1, std::sqrt(106 * std::log(2.0)), 1e-12);  // theta = pi/2: all in sin
  EXPECT_NEAR(d0, 0.0, 1e-12);
}

}  // namespace
}  // namespace minitrain
