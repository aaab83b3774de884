#pragma once
// The two 16-bit floating-point formats of mixed-precision training, as storage types:
//   bfloat16: 1 sign, 8 exponent, 7 mantissa bits (float32's range, 3 significant digits);
//   float16 (IEEE binary16): 1 sign, 5 exponent, 10 mantissa bits (largest finite 65504).
// Arithmetic is never done in them: a value is widened to float32 (exactly), computed on, and
// the result narrowed back with round-to-nearest-even, as torch and the GPU's conversion
// instructions do. The conversions are integer bit operations shared by the CPU loops and the
// CUDA kernels (MT_HOST_DEVICE), so both devices round every value identically.

#include <cstdint>
#include <cstring>

#include "core/host_device.h"

namespace minitrain {

struct BFloat16 {
  uint16_t bits;
};
struct Half {
  uint16_t bits;
};

namespace half_detail {
MT_HOST_DEVICE uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
MT_HOST_DEVICE float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace half_detail

/// float32 -> bfloat16, round to nearest even; NaN stays a (quiet) NaN, overflow becomes inf.
MT_HOST_DEVICE BFloat16 to_bfloat16(float f) {
  const uint32_t u = half_detail::float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return {static_cast<uint16_t>((u >> 16) | 0x40u)};
  // Adding 0x7FFF plus the lowest kept bit carries into the kept half exactly when the dropped
  // half is above one half, or exactly one half with an odd kept half: round to nearest even.
  return {static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16)};
}

/// bfloat16 -> float32, exact (bfloat16 is float32's top half).
MT_HOST_DEVICE float to_float(BFloat16 b) {
  return half_detail::bits_float(uint32_t(b.bits) << 16);
}

/// float32 -> float16, round to nearest even: subnormals kept, |f| >= 65520 becomes inf.
MT_HOST_DEVICE Half to_half(float f) {
  const uint32_t u = half_detail::float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return {static_cast<uint16_t>(sign | 0x7E00u)};   // NaN
  if (a >= 0x477FF000u) return {static_cast<uint16_t>(sign | 0x7C00u)};  // 65520 and up: inf
  if (a < 0x38800000u) {
    // Below 2^-14 the result is subnormal, a multiple of 2^-24. Adding 0.5 puts |f| where
    // float32's spacing is exactly 2^-24, so the float addition itself rounds to nearest even;
    // the mantissa bits then hold the float16 subnormal.
    const float shifted = half_detail::bits_float(a) + 0.5f;
    return {static_cast<uint16_t>(sign | (half_detail::float_bits(shifted) - 0x3F000000u))};
  }
  // Normal: re-bias the exponent (127 -> 15, i.e. subtract 112 << 23) and round away 13 bits.
  a += 0xC8000FFFu + ((a >> 13) & 1u);
  return {static_cast<uint16_t>(sign | (a >> 13))};
}

/// float16 -> float32, exact.
MT_HOST_DEVICE float to_float(Half h) {
  const uint32_t sign = uint32_t(h.bits & 0x8000u) << 16;
  const uint32_t exponent = (h.bits >> 10) & 0x1Fu;
  const uint32_t mantissa = h.bits & 0x3FFu;
  if (exponent == 0x1F) return half_detail::bits_float(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0)
    return half_detail::bits_float(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
  // Zero or subnormal: mantissa * 2^-24, a normal float32 (the product is exact).
  const float magnitude = float(mantissa) * 5.9604644775390625e-8f;
  return sign ? -magnitude : magnitude;
}

/// Narrowing by the storage type, for templates: narrow<BFloat16>(x), narrow<Half>(x).
template <typename T>
MT_HOST_DEVICE T narrow(float f);
template <>
MT_HOST_DEVICE BFloat16 narrow<BFloat16>(float f) {
  return to_bfloat16(f);
}
template <>
MT_HOST_DEVICE Half narrow<Half>(float f) {
  return to_half(f);
}

/// The float32 value of x rounded to T's precision and back: what storing it in T keeps.
template <typename T>
MT_HOST_DEVICE float round_to(float x) {
  return to_float(narrow<T>(x));
}

}  // namespace minitrain
