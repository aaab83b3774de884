#pragma once
// bfloat16 as the GPU converts it: float -> bf16 rounds to nearest, ties to even (cvt.rn.bf16.f32),
// NaN stays NaN (quiet); bf16 -> float is exact.

#include <cstdint>
#include <cstring>

struct __nv_bfloat16 {
  uint16_t bits;
};
typedef __nv_bfloat16 nv_bfloat16;

inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return __nv_bfloat16{static_cast<uint16_t>((u >> 16) | 0x0040u)};  // NaN
  const uint32_t lsb = (u >> 16) & 1u;
  u += 0x7fffu + lsb;  // round half to even on the 16 bits dropped
  return __nv_bfloat16{static_cast<uint16_t>(u >> 16)};
}
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
