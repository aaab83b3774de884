#pragma once
// Conversion between element types (float32 <-> float64). Memory-bound: one read and one write
// per element, of different widths.

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

// ---- implementations (instantiated for <float, double> and <double, float>) ----
template <typename To, typename From>
void cast_cpu(To* out, const From* in, int64_t n);
template <typename To, typename From>
void cast_cuda(To* out, const From* in, int64_t n, CUstream_st* stream);

}  // namespace minitrain
