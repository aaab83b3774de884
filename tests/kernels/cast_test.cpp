// cast between float32 and float64 against static_cast loops, and to and from the 16-bit types
// against core/half.h's scalar conversions (tested exhaustively in tests/core/half_test.cpp), on
// every device: the GPU's kernels must give the CPU's bits.

#include "kernels/cast.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"
#include "kernels/multi_tensor_apply.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

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

// ---- the multi-tensor cast of mixed precision ----

// Each of Store, Add, AddToZero and Narrow against the one-tensor ops it replaces
// (round_to_precision; then axpy; zero_ then axpy; cast to the 16-bit dtype), bit for bit, over odd
// sizes and one across two chunks of multi-tensor apply, with a tensor rounded in place and -0
// among the inputs (AddToZero makes it +0, as zero_ then axpy does).
TEST_P(CastTest, RoundToPrecisionMultiGivesTheOneTensorOpsBits) {
  for (DType p : {DType::BFloat16, DType::Float16}) {
    SCOPED_TRACE(dtype_name(p));
    std::vector<Tensor> ins, outs, want;
    std::vector<RoundedCast> items;
    // (The two-chunk size is skipped under the racecheck stage's size cap: multi-tensor apply's
    // chunking is the optimizers' too, and the odd sizes run the same kernel code.)
    std::vector<int64_t> sizes;
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, kMultiTensorChunk + 5, int64_t{3}})
      if (!testing::over_size_cap(n)) sizes.push_back(n);
    const RoundedInto modes[] = {RoundedInto::Store, RoundedInto::Add, RoundedInto::AddToZero,
                                 RoundedInto::Narrow};
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      std::vector<float> v = sixteen_bit_probes(sizes[k], 20 + uint32_t(k));
      v[0] = -0.0f;
      ins.push_back(Tensor::from_vector(v, {sizes[k]}, device()));
      const std::vector<float> old = random_floats(sizes[k], 40 + uint32_t(k));
      outs.push_back(Tensor::from_vector(old, {sizes[k]}, device()));
      Tensor r = Tensor::empty({sizes[k]}, DType::Float32, device());
      round_to_precision(r, ins.back(), p);
      Tensor w = Tensor::from_vector(old, {sizes[k]}, device());
      switch (modes[k % 4]) {
        case RoundedInto::Store:
          w = r;
          break;
        case RoundedInto::Narrow:  // out is a 16-bit tensor of old contents
          outs.back() = cast(outs.back(), p);
          w = cast(ins.back(), p);
          break;
        case RoundedInto::AddToZero:
          zero_(w);
          [[fallthrough]];
        case RoundedInto::Add:
          axpy(w, 1.0, r);
      }
      want.push_back(w);
    }
    for (std::size_t k = 0; k < ins.size(); ++k) items.push_back({&outs[k], &ins[k], modes[k % 4]});
    Tensor in_place = Tensor::from_vector(sixteen_bit_probes(9, 30), {9}, device());
    Tensor in_place_want = Tensor::empty({9}, DType::Float32, device());
    round_to_precision(in_place_want, in_place, p);
    items.push_back({&in_place, &in_place, RoundedInto::Store});

    round_to_precision_multi(items, p);
    for (std::size_t k = 0; k < outs.size(); ++k) {
      if (sizes[k] > 1) ASSERT_GT(host_max_abs(outs[k]), 0.0);  // (tensor 0 holds only -0)
      EXPECT_EQ(outs[k].dtype(), want[k].dtype()) << "tensor " << k;
      EXPECT_TRUE(same_values(host_values(outs[k]), host_values(want[k])))
          << "tensor " << k << ", mode " << int(modes[k % 4]);
    }
    EXPECT_TRUE(same_values(host_values(in_place), host_values(in_place_want))) << "in place";
    EXPECT_TRUE(std::signbit(host_values(outs[2])[0]) == false) << "AddToZero: 0 + -0 is +0";
    EXPECT_TRUE(std::signbit(host_values(outs[0])[0])) << "Store keeps -0";
  }
}

// More tensors than one launch's table holds (64 at depth 2): each still rounded once.
TEST_P(CastTest, RoundToPrecisionMultiOverManyTensors) {
  std::vector<Tensor> ins, outs;
  std::vector<RoundedCast> items;
  for (int k = 0; k < 150; ++k) {
    ins.push_back(
        Tensor::from_vector(sixteen_bit_probes(1 + k % 5, 100 + k), {1 + k % 5}, device()));
    outs.push_back(Tensor::zeros({1 + k % 5}, DType::Float32, device()));
  }
  for (int k = 0; k < 150; ++k) items.push_back({&outs[k], &ins[k], RoundedInto::Add});
  round_to_precision_multi(items, DType::Float16);
  for (int k = 0; k < 150; ++k) {
    Tensor want = Tensor::zeros({1 + k % 5}, DType::Float32, device());
    round_to_precision(want, ins[k], DType::Float16);
    EXPECT_TRUE(same_values(host_values(outs[k]), host_values(want))) << "tensor " << k;
  }
  round_to_precision_multi({}, DType::Float16);  // nothing to do
}

TEST_P(CastTest, RoundToPrecisionMultiNamesTheBadItem) {
  Tensor a = Tensor::zeros({4}, DType::Float32, device());
  Tensor b = Tensor::zeros({4}, DType::Float32, device());
  Tensor wide = Tensor::zeros({4}, DType::Float64, device());
  Tensor five = Tensor::zeros({5}, DType::Float32, device());
  try {
    round_to_precision_multi({{&a, &b}, {&wide, &b}}, DType::BFloat16);
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("item 1"));
    EXPECT_THAT(e.what(), HasSubstr("float64"));
  }
  EXPECT_THROW(round_to_precision_multi({{&a, &b}, {&five, &b}}, DType::BFloat16), ShapeError);
  // Narrow writes the precision itself: a float32 out, or one of the other 16-bit dtype, is named.
  Tensor half = Tensor::zeros({4}, DType::Float16, device());
  for (Tensor* out : {&a, &half}) {
    try {
      round_to_precision_multi({{&a, &b}, {out, &b, RoundedInto::Narrow}}, DType::BFloat16);
      FAIL() << "expected DTypeError for a Narrow out of " << out->dtype();
    } catch (const DTypeError& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("item 1 is out ") + dtype_name(out->dtype())));
      EXPECT_THAT(e.what(), HasSubstr("out bfloat16"));
    }
  }
  // ...and Store, Add and AddToZero write float32 only.
  EXPECT_THROW(round_to_precision_multi({{&half, &b}}, DType::Float16), DTypeError);
  try {
    round_to_precision_multi({{&a, &b}}, DType::Float32);
    FAIL() << "expected DTypeError";
  } catch (const DTypeError& e) {
    EXPECT_THAT(e.what(), HasSubstr("bfloat16 or float16"));
  }
  if (device().is_cuda()) {
    Tensor host = Tensor::zeros({4}, DType::Float32);
    Tensor host_in = Tensor::zeros({4}, DType::Float32);
    try {
      round_to_precision_multi({{&a, &b}, {&host, &host_in}}, DType::Float16);
      FAIL() << "expected DeviceError";
    } catch (const DeviceError& e) {
      EXPECT_THAT(e.what(), HasSubstr("item 1"));
    }
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(CastTest);

// On a GPU the whole list is one launch up to 64 tensors (a table's worth), then one per table.
TEST(CastCuda, RoundToPrecisionMultiIsOneLaunchPerTableOfTensors) {
  if (cuda_device_count() < 1) GTEST_SKIP() << cuda_unavailable_reason();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  const Device gpu = Device::cuda(0);
  std::vector<Tensor> ins, outs;
  for (int k = 0; k < 65; ++k) {
    ins.push_back(Tensor::from_vector(random_floats(3 + k, uint32_t(k)), {3 + k}, gpu));
    outs.push_back(Tensor::empty({3 + k}, DType::Float32, gpu));
  }
  auto launches_for = [&](int tensors) {
    std::vector<RoundedCast> items;
    for (int k = 0; k < tensors; ++k) items.push_back({&outs[k], &ins[k], RoundedInto::Store});
    const uint64_t before = mtemu::api_counts().launches;
    round_to_precision_multi(items, DType::BFloat16);
    return mtemu::api_counts().launches - before;
  };
  EXPECT_EQ(launches_for(6), 1u);
  EXPECT_EQ(launches_for(64), 1u);
  EXPECT_EQ(launches_for(65), 2u);
#endif
}

}  // namespace
}  // namespace minitrain
