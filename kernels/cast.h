#pragma once
// Conversion between element types: float32, float64, bfloat16, float16 (kernels/convert.h says
// how each pair rounds). Memory-bound: one read and one write per element, of different widths.
// Mixed precision uses two more: rounding float32 values to a 16-bit precision in place (what a
// tensor keeps when torch computes it in bfloat16 and it is then widened), and nothing else.

#include <cstdint>

#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// out[i] = in[i] converted to out's dtype (round to nearest when narrowing, as torch does).
/// Same device and shape; any pair of dtypes, a plain copy when they are equal.
void cast(Tensor& out, const Tensor& in);
/// A new tensor on in's device holding in's values as `to` (always new memory, even when
/// in.dtype() == to, so the result can be written without touching `in`).
Tensor cast(const Tensor& in, DType to);
/// out[i] = in[i] rounded to `precision` (bfloat16 or float16, nearest even) and widened back:
/// float32 tensors, same device and shape; `out` may be `in`. float32 precision copies.
void round_to_precision(Tensor& out, const Tensor& in, DType precision);

// ---- implementations (instantiated for every pair of distinct dtypes) ----
template <typename To, typename From>
void cast_cpu(To* out, const From* in, int64_t n);
template <typename To, typename From>
void cast_cuda(To* out, const From* in, int64_t n, CUstream_st* stream);
/// T = BFloat16 or Half.
template <typename T>
void round_to_precision_cpu(float* out, const float* in, int64_t n);
template <typename T>
void round_to_precision_cuda(float* out, const float* in, int64_t n, CUstream_st* stream);

}  // namespace minitrain
