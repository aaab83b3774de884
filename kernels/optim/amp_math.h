#pragma once
// Per-element math of dynamic loss scaling, shared by the CPU loop and the CUDA kernel.

#include <cstdint>

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

/// The scaler's state on a device: float32 [kAmpStateSize] = {scale, growth tracker}. The tracker
/// counts finite steps in a row (< growth_interval, exact in float32 below 2^24).
constexpr int kAmpStateSize = 2;
/// What a step's update records for the host to read later (float64): the scale the step used,
/// its inf flag (0/1), the scale and tracker after the update.
constexpr int kAmpRecordSize = 4;

/// torch's _amp_update_scale_ on one state: an overflow backs off (scale * backoff, the tracker
/// restarts); otherwise the tracker grows, and at growth_interval the scale grows unless that
/// overflows float32. The products are in double, then rounded (torch's float * double).
/// With `batches` (non-null) holding 0, a step that counted nothing (Note [a batch that counts
/// nothing, on the device] in kernels/loss/cross_entropy.h): the state stays as it is, as on the
/// host, which neither unscales nor updates such a step, and `raise` (non-null: the optimizer's
/// flag) is set to 1 so that the optimizer skips it; the record says flag 0 and the state
/// unchanged.
MT_HOST_DEVICE void amp_update_scale_one(float* state, const float* found_inf, double growth,
                                         double backoff, int64_t growth_interval, double* record,
                                         const double* batches = nullptr, float* raise = nullptr) {
  const float used = state[0];
  const bool none = batches != nullptr && batches[0] == 0;
  const bool found = !none && *found_inf != 0.0f;
  if (none) {
    if (raise != nullptr) *raise = 1.0f;
  } else if (found) {
    state[0] = static_cast<float>(static_cast<double>(used) * backoff);
    state[1] = 0.0f;
  } else {
    const float tracker = state[1] + 1.0f;
    if (static_cast<int64_t>(tracker) == growth_interval) {
      const float grown = static_cast<float>(static_cast<double>(used) * growth);
      if ((half_detail::float_bits(grown) & 0x7F800000u) != 0x7F800000u) state[0] = grown;
      state[1] = 0.0f;
    } else {
      state[1] = tracker;
    }
  }
  if (record != nullptr) {
    record[0] = used;
    record[1] = found ? 1.0 : 0.0;
    record[2] = state[0];
    record[3] = state[1];
  }
}

/// 1/scale as torch computes it (scale.double().reciprocal().float()).
MT_HOST_DEVICE float amp_inv_scale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

}  // namespace minitrain
