#pragma once
// Note [skip on the device] (issue 35): dynamic loss scaling skips the optimizer step whose
// gradients overflowed. Deciding that on the host needs the inf flag read back, a blocking copy
// every step. As torch's fused optimizers (`found_inf`), the update kernels read the flag from
// device memory instead and leave everything untouched when it is set.
//
// A skipped step must not count: Adam's bias corrections use the parameter's count of steps
// taken, SGD's momentum buffer is created by its first step taken. Those counts then live on the
// device too, one pair of floats per parameter (torch keeps `state['step']` as a float tensor
// there). The kernel reads one element of the pair, and the first thread of the tensor's first
// chunk writes the other (the count plus one, or unchanged when skipped): no block reads what
// another writes in the same launch. The host flips which element is current after each launch.
// Adam's factors for a count t need 1 - beta^t: the host keeps them in a device table (its own
// std::pow, as for a launch by value), and the kernel finishes step_size = lr / (1 - beta1^t) and
// sqrt(1 - beta2^t) in double, one division and one square root, IEEE-rounded on both the GPU
// and the CPU: the factors have the bits of adam_step_args' by-value launch. What a row does with
// the count is its counted() / at_count() (Note [one row per optimizer] in optimizer_math.h).

#include <cstdint>

#include "core/host_device.h"
#include "kernels/optim/optimizer_math.h"

namespace minitrain {

/// By-value kernel argument of a skippable step.
struct SkipArgs {
  const float* found_inf = nullptr;    ///< a float 0/1 (non-zero: skip)
  double lr = 0.0;                     ///< Adam: this step's learning rate
  const double* bias_table = nullptr;  ///< Adam: {1 - beta1^t, 1 - beta2^t} at 2 (t - 1)
  /// Adam in a captured step (Note [capturable step]): the rate read here, in the step's factor
  /// buffer, instead of `lr`, which a replayed graph would repeat.
  const double* lr_on_device = nullptr;
};

/// Adam's rate for this step: from device memory when the step is captured.
MT_HOST_DEVICE double skip_lr(const SkipArgs& s) {
  return s.lr_on_device != nullptr ? *s.lr_on_device : s.lr;
}

/// The other element of a count pair (float[2], 8-byte aligned): its address's bit 2 says which
/// element `current` is.
MT_HOST_DEVICE float* other_count(float* current) {
  return (reinterpret_cast<uintptr_t>(current) & 4u) != 0 ? current - 1 : current + 1;
}

/// Reads the flag and the count, and (writer only) stores the next count. Returns the count of
/// steps taken before this one, or -1 when this step is skipped.
MT_HOST_DEVICE int64_t take_counted_step(const SkipArgs& s, float* count, bool writer) {
  const float taken = *count;
  const bool skip = *s.found_inf != 0.0f;
  if (writer) *other_count(count) = skip ? taken : taken + 1.0f;
  return skip ? -1 : static_cast<int64_t>(taken);
}

}  // namespace minitrain
