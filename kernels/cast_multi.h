#pragma once
// The per-element rule of round_to_precision_multi (kernels/cast.h), shared by the CPU loop and
// the CUDA kernel so both devices give the same bits: r = round16(in), then stored, added to out
// (axpy's y + 1 * x: exact in the multiply, one rounding in the add, as an FMA gives it too), or
// added to zero (a gradient zeroed, then added to).

#include "core/half.h"
#include "core/host_device.h"
#include "kernels/cast.h"

namespace minitrain {

// `out` is read only to add to (Store and AddToZero may write memory never written before).
template <typename T>
MT_HOST_DEVICE float rounded_into(const float* out, float in, RoundedInto how) {
  const float r = round_to<T>(in);
  if (how == RoundedInto::Store) return r;
  if (how == RoundedInto::AddToZero) return 0.0f + r;
  return *out + r;
}

}  // namespace minitrain
