#pragma once
// Random-number state: a seed and a counter offset into the Philox stream (core/philox.h).
// Element i of a draw made at offset o uses counter o + i / 4 (o + i / 2 for float64, which takes
// two 32-bit words a value: Note [Philox stream layout] in core/philox.h), so the same seed gives
// the same numbers on the CPU and on any GPU, whatever the thread layout. Saving (seed, offset)
// in a checkpoint and restoring it resumes the exact stream.

#include <cstdint>

namespace minitrain {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const noexcept { return seed_; }
  uint64_t offset() const noexcept { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) noexcept {
    seed_ = seed;
    offset_ = offset;
  }
  /// Reserves `counters` Philox counters (4 random words each) and returns the first.
  uint64_t advance(uint64_t counters) noexcept {
    const uint64_t o = offset_;
    offset_ += counters;
    return o;
  }

 private:
  uint64_t seed_;
  uint64_t offset_ = 0;
};

}  // namespace minitrain
