// The 16-bit storage types of mixed precision (core/half.h): every float16 and bfloat16 bit
// pattern widens to its exact value, and narrowing rounds to nearest even, ties to even, with
// float16's subnormals and overflow to inf, checked against a reference written from the formats'
// definitions in double arithmetic (not from half.h's bit tricks).

#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace minitrain {
namespace {

struct Format {
  const char* name;
  int mantissa_bits;  // stored fraction bits
  int min_exponent;   // of the smallest normal: 2^min_exponent
  double max_finite;
};
constexpr Format kFloat16{"float16", 10, -14, 65504.0};
constexpr Format kBfloat16{"bfloat16", 7, -126, 3.3895313892515355e38};  // (2 - 2^-7) * 2^127

// The value a 16-bit pattern stands for, decoded field by field.
double decode(uint16_t bits, int exponent_bits, int mantissa_bits) {
  const int bias = (1 << (exponent_bits - 1)) - 1;
  const int e = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1);
  const int m = bits & ((1 << mantissa_bits) - 1);
  const double sign = (bits >> 15) ? -1.0 : 1.0;
  if (e == (1 << exponent_bits) - 1)
    return m ? std::numeric_limits<double>::quiet_NaN()
             : sign * std::numeric_limits<double>::infinity();
  if (e == 0) return sign * std::ldexp(m, 1 - bias - mantissa_bits);  // zero and subnormals
  return sign * std::ldexp((1 << mantissa_bits) + m, e - bias - mantissa_bits);
}

// f rounded to the format: the nearest multiple of the quantum at f's binade (the subnormal one
// below the smallest normal), ties to even (nearbyint under the default rounding mode), and inf
// past the largest finite value.
double reference_round(float f, const Format& fmt) {
  if (std::isnan(f)) return std::numeric_limits<double>::quiet_NaN();
  const double a = std::fabs(static_cast<double>(f));
  if (a == 0 || std::isinf(a)) return f;
  const int e = std::max(std::ilogb(a), fmt.min_exponent);
  const double quantum = std::ldexp(1.0, e - fmt.mantissa_bits);
  const double r = std::nearbyint(a / quantum) * quantum;
  return std::copysign(r > fmt.max_finite ? std::numeric_limits<double>::infinity() : r, f);
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Same value, zeros compared with their signs, any NaN equal to any NaN.
::testing::AssertionResult same_value(double got, double want) {
  if (std::isnan(want) ? std::isnan(got) : got == want && std::signbit(got) == std::signbit(want))
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

TEST(HalfConversion, EveryFloat16PatternWidensToItsExactValue) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    ASSERT_TRUE(same_value(to_float(Half{bits}), decode(bits, 5, 10)))
        << "bits 0x" << std::hex << b;
  }
}

TEST(HalfConversion, EveryBfloat16PatternWidensToItsExactValue) {
  for (uint32_t b = 0; b <= 0xFFFF; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    ASSERT_TRUE(same_value(to_float(BFloat16{bits}), decode(bits, 8, 7)))
        << "bits 0x" << std::hex << b;
  }
}

// Floats that test the rounding: every representable 16-bit value, the midpoints between
// neighbours (the ties), one float ulp either side of each, the overflow threshold's region, and a
// million random bit patterns over the whole range.
std::vector<float> probes(bool float16) {
  std::vector<float> out;
  // Every positive finite pattern but the largest (whose next pattern is inf).
  const uint32_t end = float16 ? 0x7BFFu : 0x7F7Fu;
  for (uint32_t b = 0; b < end; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b), up = static_cast<uint16_t>(b + 1);
    const float v = float16 ? to_float(Half{bits}) : to_float(BFloat16{bits});
    const float next = float16 ? to_float(Half{up}) : to_float(BFloat16{up});
    const float mid = static_cast<float>((double(v) + double(next)) / 2);  // exact in float
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      out.push_back(x);
      out.push_back(-x);
    }
  }
  for (float x : {65504.0f, 65519.0f, 65519.99f, 65520.0f, 65536.0f, 1e30f, 3.4e38f,
                  std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 1e-45f, 2.9e-8f, 3.0e-8f, 6.0e-8f})
    out.insert(out.end(), {x, -x});
  std::mt19937 rng(7);
  for (int i = 0; i < 1000000; ++i) out.push_back(from_bits(rng()));
  return out;
}

TEST(HalfConversion, NarrowingToFloat16RoundsToNearestEven) {
  int64_t checked = 0;
  for (float f : probes(true)) {
    ASSERT_TRUE(same_value(to_float(to_half(f)), reference_round(f, kFloat16))) << "f = " << f;
    ++checked;
  }
  EXPECT_GT(checked, 1000000);
  // The edges by value: the largest finite, the first overflow (a tie rounded up to 2^16), the
  // smallest subnormal and half of it (a tie rounded to even: zero).
  EXPECT_EQ(to_half(65519.0f).bits, 0x7BFF);
  EXPECT_EQ(to_half(65520.0f).bits, 0x7C00);
  EXPECT_EQ(to_half(-65520.0f).bits, 0xFC00);
  EXPECT_EQ(to_half(5.9604644775390625e-8f).bits, 0x0001);
  EXPECT_EQ(to_half(2.98023223876953125e-8f).bits, 0x0000);
  EXPECT_TRUE(std::isnan(to_float(to_half(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(HalfConversion, NarrowingToBfloat16RoundsToNearestEven) {
  for (float f : probes(false))
    ASSERT_TRUE(same_value(to_float(to_bfloat16(f)), reference_round(f, kBfloat16))) << "f = " << f;
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to the even one, 1; 1 + 3 * 2^-8 rounds up.
  EXPECT_EQ(to_float(to_bfloat16(1.00390625f)), 1.0f);
  EXPECT_EQ(to_float(to_bfloat16(1.01171875f)), 1.015625f);
  // A NaN whose payload lies in the dropped half stays a NaN (truncation would make it inf).
  EXPECT_TRUE(std::isnan(to_float(to_bfloat16(from_bits(0x7F800001u)))));
  EXPECT_TRUE(std::isinf(to_float(to_bfloat16(std::numeric_limits<float>::max()))));
}

TEST(HalfConversion, RoundToIsNarrowThenWiden) {
  for (float f : {0.1f, -3.14159f, 1e-6f, 70000.0f, 1e-40f}) {
    EXPECT_EQ(round_to<Half>(f), to_float(to_half(f)));
    EXPECT_EQ(round_to<BFloat16>(f), to_float(to_bfloat16(f)));
  }
}

}  // namespace
}  // namespace minitrain
