#pragma once
// Size arithmetic that cannot wrap. Every element count (Shape checks its product when built),
// byte count (Tensor) and allocation (Storage, bounded by kMaxAllocationBytes) is checked, so a
// hostile size such as
// `--model mlp:4,4611686018427387904,1` is a ValueError naming the sizes instead of a product that
// wraps to a tiny block which the initialiser then overruns.

#include <cstddef>
#include <cstdint>

#include "core/error.h"

namespace minitrain {

/// The largest block minitrain asks any allocator for: 2^62 bytes (4 EiB). Far beyond any
/// machine, yet small enough that rounding a request up to an alignment cannot wrap.
constexpr std::size_t kMaxAllocationBytes = std::size_t{1} << 62;

/// a * b for non-negative a and b, or a ValueError "<what>: a x b does not fit in 64 bits". The
/// `what` arguments are streamed only on failure: pass values, not strings built for the message.
template <typename... What>
int64_t checked_mul(int64_t a, int64_t b, const What&... what) {
  int64_t product = 0;
  if (__builtin_mul_overflow(a, b, &product))
    MT_THROW(ValueError, what..., ": ", a, " x ", b, " does not fit in 64 bits");
  return product;
}

}  // namespace minitrain
