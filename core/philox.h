#pragma once
// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC'11), with the Random123 library's constants. A pure function of (counter, key):
// ten rounds of two 32x32->64 multiplies and xors, so any element of a stream costs the same and
// a CPU loop and a CUDA thread compute the very same bits from the same integer code.
//
// Note [Philox stream layout]: a draw of n values at generator offset o (core/generator.h) gives
// value i the Philox block of counter (o + i / V), key = seed, where V values fit in one block of
// four 32-bit words: V = 4 for float32 (one word a value), V = 2 for float64 (two words a value).
// The 128-bit counter is {low 32 of the counter, high 32, 0, 0}; the key is {low 32 of the seed,
// high 32}. A draw reserves ceil(n / V) counters, so consecutive draws never share a block.
//
// Note [host/device equality]: the Philox words and the integer-to-float conversions are exact,
// so uniforms are bit-identical on the CPU and the GPU (the affine map lo + (hi - lo) * u is
// rounded after each operation on both sides: see mul_rn/add_rn). Normals go through logf,
// sqrtf, cosf and sinf: CUDA's versions (without --use_fast_math) are within 1-2 ulp of the
// correctly rounded result, glibc's likewise but not always the same ulp, so CPU and GPU normals
// agree "within a few ulp", not bit for bit.

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

namespace minitrain::philox {

// Random123's constants: the multipliers were chosen for avalanche; the key increments are the
// golden ratio and sqrt(3) - 1 in 0.32 fixed point (Weyl sequences).
inline constexpr uint32_t kMul0 = 0xD2511F53u;
inline constexpr uint32_t kMul1 = 0xCD9E8D57u;
inline constexpr uint32_t kWeyl0 = 0x9E3779B9u;
inline constexpr uint32_t kWeyl1 = 0xBB67AE85u;
inline constexpr int kRounds = 10;  ///< 7 already passes BigCrush; 10 is Random123's safe default

/// Four 32-bit words: a counter going in, random bits coming out.
struct Block {
  uint32_t w[4];
};
/// The two 32-bit key words.
struct Key {
  uint32_t k[2];
};

/// The high and low halves of the 64-bit product a * b (one IMAD.WIDE on the GPU).
MT_HOST_DEVICE void mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

/// One round: a two-lane Feistel-like mix of the multiply halves, the other words and the key.
MT_HOST_DEVICE Block philox_round(const Block& c, const Key& key) {
  uint32_t hi0, lo0, hi1, lo1;
  mulhilo(kMul0, c.w[0], hi0, lo0);
  mulhilo(kMul1, c.w[2], hi1, lo1);
  return Block{{hi1 ^ c.w[1] ^ key.k[0], lo1, hi0 ^ c.w[3] ^ key.k[1], lo0}};
}

MT_HOST_DEVICE Key bump_key(const Key& key) { return Key{{key.k[0] + kWeyl0, key.k[1] + kWeyl1}}; }

/// Philox4x32-R: Rounds rounds, the key bumped between rounds (Random123's philox4x32_R).
template <int Rounds = kRounds>
MT_HOST_DEVICE Block philox4x32(Block ctr, Key key) {
  static_assert(Rounds >= 1 && Rounds <= 16, "Philox4x32 is defined for 1..16 rounds");
  ctr = philox_round(ctr, key);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int r = 1; r < Rounds; ++r) {
    key = bump_key(key);
    ctr = philox_round(ctr, key);
  }
  return ctr;
}

/// The block of stream position `counter` for `seed` (Note [Philox stream layout]).
MT_HOST_DEVICE Block random_block(uint64_t seed, uint64_t counter) {
  const Block ctr{{static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u}};
  const Key key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  return philox4x32<kRounds>(ctr, key);
}

// ---- words to uniform floats ----
// Note [uniform intervals]: uniforms are in [0, 1) as torch.rand's, so U(lo, hi) fills are
// [lo, hi). Box-Muller needs log(u1) with u1 > 0, so it takes the (0, 1] variant (curand's
// convention, which torch's CUDA normal uses): no log(0), no branch. Both use the top 24 bits
// (float) or 53 bits (double), so every value is exact: k * 2^-24 or k * 2^-53.

/// [0, 1): the top 24 bits times 2^-24; the largest value is 1 - 2^-24.
MT_HOST_DEVICE float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * 0x1p-24f; }
/// (0, 1]: (top 24 bits + 1) times 2^-24; the smallest value is 2^-24, the largest 1.
MT_HOST_DEVICE float uniform_float_nonzero(uint32_t x) {
  return static_cast<float>((x >> 8) + 1u) * 0x1p-24f;
}
/// [0, 1) from two words: the top 53 bits of (hi:lo) times 2^-53.
MT_HOST_DEVICE double uniform_double(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits) * 0x1p-53;
}
/// (0, 1] from two words: (top 53 bits + 1) times 2^-53.
MT_HOST_DEVICE double uniform_double_nonzero(uint32_t hi, uint32_t lo) {
  const uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 11;
  return static_cast<double>(bits + 1u) * 0x1p-53;
}

// ---- arithmetic that rounds the same way on both sides ----
// nvcc contracts a * b + c into one fused multiply-add by default; the host (ISO C++ mode, no
// -ffp-contract=fast) rounds twice. These keep the device to two roundings as well.
MT_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
MT_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
MT_HOST_DEVICE double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
MT_HOST_DEVICE double add_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// lo + range * u for u in [0, 1), kept in [lo, hi): rounding can carry lo + range * u up to hi
/// exactly (lo = 1, hi = 2, u = 1 - 2^-24 in float32); that value becomes lo, as in torch's CUDA
/// uniform_. When lo == hi every value is lo.
template <typename T>
MT_HOST_DEVICE T uniform_in(T u, T lo, T range, T hi) {
  const T scaled = mul_rn(range, u);
  const T v = add_rn(lo, scaled);
  return v < hi ? v : lo;
}

// ---- Box-Muller: two uniforms to two independent standard normals ----
// z0 = r cos(theta), z1 = r sin(theta), r = sqrt(-2 log u1), theta = 2 pi u2, u1 in (0, 1],
// u2 in [0, 1). The smallest u1 bounds the tail: |z| <= sqrt(2 * 24 ln 2) = 5.77 in float32,
// sqrt(2 * 53 ln 2) = 8.57 in float64 (a float32 tail beyond 5.77 sigma has probability 8e-9).

MT_HOST_DEVICE void box_muller(float u1, float u2, float& z0, float& z1) {
  const float r = ::sqrtf(-2.0f * ::logf(u1));
  const float theta = 6.2831853071795864769f * u2;
  z0 = r * ::cosf(theta);
  z1 = r * ::sinf(theta);
}
MT_HOST_DEVICE void box_muller(double u1, double u2, double& z0, double& z1) {
  const double r = ::sqrt(-2.0 * ::log(u1));
  const double theta = 6.2831853071795864769 * u2;
  z0 = r * ::cos(theta);
  z1 = r * ::sin(theta);
}

// ---- one block to V values (Note [Philox stream layout]) ----

template <typename T>
struct values_per_block;
template <>
struct values_per_block<float> {
  static constexpr int value = 4;  ///< one word a value
};
template <>
struct values_per_block<double> {
  static constexpr int value = 2;  ///< two words a value: 53 random bits need more than 32
};

/// The V uniforms in [lo, hi) of one block: float lane j from word j, double j from words 2j, 2j+1.
MT_HOST_DEVICE void uniform_values(const Block& b, float lo, float range, float hi, float* out) {
  for (int j = 0; j < 4; ++j) out[j] = uniform_in(uniform_float(b.w[j]), lo, range, hi);
}
MT_HOST_DEVICE void uniform_values(const Block& b, double lo, double range, double hi,
                                   double* out) {
  for (int j = 0; j < 2; ++j)
    out[j] = uniform_in(uniform_double(b.w[2 * j], b.w[2 * j + 1]), lo, range, hi);
}

/// The V normals mean + std * z of one block. float32: words (0, 1) give values 0 (cos) and 1
/// (sin), words (2, 3) values 2 and 3. float64: words (0, 1) make u1, (2, 3) make u2; values 0, 1.
MT_HOST_DEVICE void normal_values(const Block& b, float mean, float stddev, float* out) {
  float z[4];
  box_muller(uniform_float_nonzero(b.w[0]), uniform_float(b.w[1]), z[0], z[1]);
  box_muller(uniform_float_nonzero(b.w[2]), uniform_float(b.w[3]), z[2], z[3]);
  for (int j = 0; j < 4; ++j) out[j] = add_rn(mean, mul_rn(stddev, z[j]));
}
MT_HOST_DEVICE void normal_values(const Block& b, double mean, double stddev, double* out) {
  double z[2];
  box_muller(uniform_double_nonzero(b.w[0], b.w[1]), uniform_double(b.w[2], b.w[3]), z[0], z[1]);
  for (int j = 0; j < 2; ++j) out[j] = add_rn(mean, mul_rn(stddev, z[j]));
}

}  // namespace minitrain::philox
