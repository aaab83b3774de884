// cast between float32 and float64 against static_cast loops, and to and from the 16-bit types
// against core/half.h's scalar conversions (tested exhaustively in tests/core/half_test.cpp), on
// every device: the GPU's kernels must give the CPU's bits.

#include "kernels/cast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::host_values;
using testing::random_doubles;
using testing::random_floats;

class CastTest : public testing::DeviceTest {};

TEST_P(CastTest, FloatToDoubleIsExactOnOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    const std::vector<float> v = random_floats(n, 3);
    Tensor in = Tensor::from_vector(v, {n}, device());
    Tensor out = cast(in, DType::Float64);
    ASSERT_EQ(out.dtype(), DType::Float64);
    ASSERT_GT(host_max_abs(out), 0.0);
    // widening is exact: every float is a double
    EXPECT_ALLCLOSE(host_values(out), std::vector<double>(v.begin(), v.end()), 0.0, 0.0)
        << "n=" << n;
  }
}

TEST_P(CastTest, DoubleToFloatRoundsToNearestOnOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    const std::vector<double> v = random_doubles(n, 4);
    std::vector<double> want(v.size());
    for (size_t i = 0; i < v.size(); ++i) want[i] = double(static_cast<float>(v[i]));
    Tensor in = Tensor::from_vector(v, {n}, device());
    Tensor out = Tensor::zeros({n}, DType::Float32, device());
    cast(out, in);
    ASSERT_GT(host_max_abs(out), 0.0);
    // exact: both sides round each double to its nearest float (IEEE round-to-nearest-even)
    EXPECT_ALLCLOSE(host_values(out), want, 0.0, 0.0) << "n=" << n;
  }
}

TEST_P(CastTest, SameDTypeMakesAnIndependentCopy) {
  Tensor in = Tensor::from_vector(std::vector<float>{1.f, -2.f, 3.5f}, {3}, device());
  Tensor out = cast(in, DType::Float32);
  EXPECT_FALSE(out.shares_storage_with(in));
  EXPECT_ALLCLOSE(out, in, 0.0, 0.0);
  Tensor out2 = Tensor::zeros({3}, DType::Float32, device());
  cast(out2, in);
  EXPECT_ALLCLOSE(out2, in, 0.0, 0.0);
}

TEST_P(CastTest, RejectsShapeMismatchAndUndefined) {
  Tensor in = Tensor::zeros({4}, DType::Float32, device());
  Tensor out = Tensor::zeros({5}, DType::Float64, device());
  try {
    cast(out, in);
    FAIL() << "expected ShapeError";
  } catch (const ShapeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("cast"));
    EXPECT_THAT(e.what(), HasSubstr("[5]"));
    EXPECT_THAT(e.what(), HasSubstr("[4]"));
  }
  EXPECT_THROW(cast(Tensor(), DType::Float64), Error);
  Tensor undefined;
  EXPECT_THROW(cast(undefined, in), Error);
}

// ---- the 16-bit storage types ----

// Values that exercise the rounding: random ones over many binades, and the edges (float16's
// overflow threshold, subnormals, a bfloat16 tie, inf and NaN).
std::vector<float> sixteen_bit_probes(int64_t n, uint32_t seed) {
  std::vector<float> v = random_floats(n, seed);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::ldexp(v[i], int(i % 61) - 30);
  const float edges[] = {65519.0f,
                         65520.0f,
                         -7e-8f,
                         3e-8f,
                         1.00390625f,
                         std::numeric_limits<float>::infinity(),
                         std::numeric_limits<float>::quiet_NaN()};
  for (std::size_t i = 0; i < v.size() && i < std::size(edges); ++i) v[v.size() - 1 - i] = edges[i];
  return v;
}

template <typename Narrow>
std::vector<double> narrowed_then_widened(const std::vector<float>& v, Narrow narrow) {
  std::vector<double> out;
  for (float f : v) out.push_back(to_float(narrow(f)));
  return out;
}

// NaN == NaN here: element-wise equality of the values with NaNs in the same places.
::testing::AssertionResult same_values(const std::vector<double>& got,
                                       const std::vector<double>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i]))))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " vs " << want[i];
  return ::testing::AssertionSuccess();
}

TEST_P(CastTest, FloatToSixteenBitsAndBackIsTheScalarRoundingOnOddSizes) {
  for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, testing::kLargeSize}) {
    const std::vector<float> v = sixteen_bit_probes(n, 5);
    const Tensor in = Tensor::from_vector(v, {n}, device());
    const Tensor bf = cast(in, DType::BFloat16), h = cast(in, DType::Float16);
    ASSERT_EQ(bf.dtype(), DType::BFloat16);
    ASSERT_EQ(h.nbytes(), n * 2);
    EXPECT_TRUE(
        same_values(host_values(cast(bf, DType::Float32)), narrowed_then_widened(v, to_bfloat16)))
        << "bfloat16 n=" << n;
    EXPECT_TRUE(
        same_values(host_values(cast(h, DType::Float32)), narrowed_then_widened(v, to_half)))
        << "float16 n=" << n;
    // Between the two 16-bit types: through float32 (float16 -> bfloat16 rounds).
    std::vector<float> h_values;
    for (double x : host_values(h)) h_values.push_back(static_cast<float>(x));
    EXPECT_TRUE(same_values(host_values(cast(h, DType::BFloat16)),
                            narrowed_then_widened(h_values, to_bfloat16)))
        << "float16 -> bfloat16 n=" << n;
  }
}

TEST_P(CastTest, RoundToPrecisionIsNarrowThenWidenInPlace) {
  const int64_t n = 1001;
  const std::vector<float> v = sixteen_bit_probes(n, 6);
  Tensor t = Tensor::from_vector(v, {n}, device());
  round_to_precision(t, t, DType::BFloat16);  // in place
  EXPECT_TRUE(same_values(host_values(t), narrowed_then_widened(v, to_bfloat16)));
  Tensor h = Tensor::from_vector(v, {n}, device());
  Tensor out = Tensor::zeros({n}, DType::Float32, device());
  round_to_precision(out, h, DType::Float16);
  EXPECT_TRUE(same_values(host_values(out), narrowed_then_widened(v, to_half)));
  EXPECT_TRUE(same_values(host_values(h), std::vector<double>(v.begin(), v.end())))
      << "the input changed";
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(CastTest);

}  // namespace
}  // namespace minitrain
