#pragma once
// Per-element math of dynamic loss scaling, shared by the CPU loop and the CUDA kernel.

#include "core/half.h"
#include "core/host_device.h"

namespace minitrain {

/// g * inv_scale into `g`; true when g was not finite (inf or NaN), the overflow the scaler
/// backs off from. Checking the input, not the product, is what torch does: a finite gradient
/// times 1/scale (a power of two >= 2^-24 here) stays finite.
MT_HOST_DEVICE bool unscale_element(float& g, float inv_scale) {
  // By the exponent bits (all ones: inf or NaN), which no fast-math flag can assume away.
  const bool bad = (half_detail::float_bits(g) & 0x7F800000u) == 0x7F800000u;
  g *= inv_scale;
  return bad;
}

}  // namespace minitrain
