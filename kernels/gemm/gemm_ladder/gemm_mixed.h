#pragma once
// Mixed precision's GEMM operands (issue 35): each of A, B and C stored as float32, bfloat16 or
// float16. A 16-bit value widens to float32 exactly, so a kernel that reads its operands widened
// and sums in float32 in its own order gives the bits of the same kernel fed float32 copies of
// them; C is rounded once, at the store. Plain C++ with MT_HOST_DEVICE: the warptile kernel
// (08_warptile.cu) and the CPU reference (kernels/gemm/gemm_reference.cpp) use these very
// functions, so their loads and stores are the same per element.

#include <cstdint>

#include "core/half.h"
#include "core/host_device.h"
#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

namespace minitrain::gemm_ladder {

/// How an operand's elements are stored.
enum class Elem : uint8_t { Float32, BFloat16, Float16 };

/// Element i of p, widened to float32 (exact).
MT_HOST_DEVICE float load_widened(const void* p, int64_t i, Elem e) {
  switch (e) {
    case Elem::BFloat16:
      return to_float(static_cast<const BFloat16*>(p)[i]);
    case Elem::Float16:
      return to_float(static_cast<const Half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}

/// v stored as element i of p: rounded to nearest even for a 16-bit type (the cast kernels'
/// rounding, core/half.h).
MT_HOST_DEVICE void store_rounded(void* p, int64_t i, Elem e, float v) {
  switch (e) {
    case Elem::BFloat16:
      static_cast<BFloat16*>(p)[i] = to_bfloat16(v);
      break;
    case Elem::Float16:
      static_cast<Half*>(p)[i] = to_half(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}

/// Operand (gemm_tiling.h) whose elements may be 16-bit: the same indexing, loads widened.
struct MixedOperand {
  const void* p;
  Elem elem;
  int64_t ld;
  int64_t rows, cols;
  bool trans;

  MT_HOST_DEVICE int64_t offset(int64_t r, int64_t c) const {
    return trans ? c * ld + r : r * ld + c;
  }
  MT_HOST_DEVICE float at(int64_t r, int64_t c) const {
    return load_widened(p, offset(r, c), elem);
  }
  MT_HOST_DEVICE float at_or_zero(int64_t r, int64_t c) const {
    return (r < rows && c < cols) ? at(r, c) : 0.f;
  }
  /// The float32 view of a float32 operand (for float4 loads).
  MT_HOST_DEVICE Operand as_float() const {
    return Operand{static_cast<const float*>(p), ld, rows, cols, trans};
  }
};

/// The float32 view of an operand for float4 loads (legal only for float32 elements).
MT_HOST_DEVICE Operand float_view(const Operand& x) { return x; }
MT_HOST_DEVICE Operand float_view(const MixedOperand& x) { return x.as_float(); }

/// op(A) is [m, k], op(B) is [k, n], as operand_a / operand_b.
MT_HOST_DEVICE MixedOperand mixed_operand_a(const void* a, Elem e, bool trans_a, int64_t m,
                                            int64_t k) {
  return MixedOperand{a, e, trans_a ? m : k, m, k, trans_a};
}
MT_HOST_DEVICE MixedOperand mixed_operand_b(const void* b, Elem e, bool trans_b, int64_t k,
                                            int64_t n) {
  return MixedOperand{b, e, trans_b ? k : n, k, n, trans_b};
}

/// A mixed GEMM's one kernel argument: C = alpha op(A) op(B) + beta C (+ bias[col]).
struct GemmMixedArgs {
  void* c;
  Elem c_elem;
  MixedOperand a, b;
  const float* bias;  ///< null, or float32 [n]
  int64_t m, n, k;
  float alpha, beta;
  bool vec_a, vec_b;  ///< a float32 operand whose rows start on 16-byte boundaries
};

/// a + b rounded once, never contracted with a product before it into a fused multiply-add (the
/// separate bias_add pass adds to a stored float32 value).
MT_HOST_DEVICE float add_rounded(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

/// The mixed epilogue: store_c's float32 arithmetic, then + bias[col] (what bias_add adds to the
/// stored product), then one rounding to C's type. So a 16-bit C gets the bits of a float32 GEMM,
/// a bias add and a cast; a float32 C those of the GEMM (and bias add).
MT_HOST_DEVICE void store_c_mixed(const GemmMixedArgs& g, int64_t row, int64_t col, float acc) {
  const int64_t i = row * g.n + col;
  float v = g.beta == 0.f ? g.alpha * acc : g.alpha * acc + g.beta * load_widened(g.c, i, g.c_elem);
  if (g.bias != nullptr) v = add_rounded(v, g.bias[col]);
  store_rounded(g.c, i, g.c_elem, v);
}

}  // namespace minitrain::gemm_ladder
