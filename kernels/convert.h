#pragma once
// One element converted between any two of minitrain's dtypes, shared by the CPU loops and the
// CUDA kernels. float32 <-> float64 is the C++ conversion (round to nearest even when
// narrowing); a 16-bit type goes through float32: widening is exact, narrowing rounds to nearest
// even (core/half.h). float64 -> 16-bit therefore rounds twice (to float32, then to 16 bits),
// which differs from one rounding only for values within 2^-29 relative of a 16-bit tie.

#include "core/half.h"
#include "core/host_device.h"

namespace minitrain {

MT_HOST_DEVICE float widen(float x) { return x; }
MT_HOST_DEVICE float widen(double x) { return static_cast<float>(x); }
MT_HOST_DEVICE float widen(BFloat16 x) { return to_float(x); }
MT_HOST_DEVICE float widen(Half x) { return to_float(x); }

template <typename To>
struct Convert {
  template <typename From>
  MT_HOST_DEVICE static To from(From x) {
    return narrow<To>(widen(x));
  }
};
template <>
struct Convert<float> {
  template <typename From>
  MT_HOST_DEVICE static float from(From x) {
    return widen(x);
  }
};
template <>
struct Convert<double> {
  MT_HOST_DEVICE static double from(double x) { return x; }
  MT_HOST_DEVICE static double from(float x) { return x; }
  template <typename From>
  MT_HOST_DEVICE static double from(From x) {
    return widen(x);  // exact: every 16-bit value is a float32
  }
};

template <typename To, typename From>
MT_HOST_DEVICE To convert(From x) {
  return Convert<To>::from(x);
}

}  // namespace minitrain
