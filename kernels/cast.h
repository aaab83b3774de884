#pragma once
// Conversion between element types: float32, float64, bfloat16, float16 (kernels/convert.h says
// how each pair rounds). Memory-bound: one read and one write per element, of different widths.
// Mixed precision uses two more: rounding float32 values to a 16-bit precision in place (what a
// tensor keeps when torch computes it in bfloat16 and it is then widened), and nothing else.

#include <cstdint>
#include <vector>

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

// ---- mixed precision's multi-tensor cast (docs/fused_mlp.md, "Mixed precision: the casts") ----

/// What round_to_precision_multi does with tensor k's rounded values r = round16(in):
enum class RoundedInto : uint8_t {
  Store,      ///< out = r: round_to_precision's bits (a float32 copy of the weights' 16-bit values)
  Add,        ///< out = out + r: axpy(out, 1, round_to_precision(in))'s bits (a gradient added)
  AddToZero,  ///< out = 0 + r: zero_(out) then Add's bits (-0 becomes +0); out is not read
  Narrow,     ///< out = r stored in `precision` itself: cast's bits (the weights' 16-bit copies
              ///< for a GEMM that multiplies 16-bit operands as they are, Note [16-bit GEMM
              ///< operands] in nn/linear.cpp); out is a tensor of that dtype
};
struct RoundedCast {
  Tensor* out;
  const Tensor* in;
  RoundedInto how = RoundedInto::Store;
};
/// Every item's `out` from its `in` rounded to `precision` (bfloat16 or float16, nearest even) and
/// widened back, as `how` says: float32 tensors on one device, each out of its in's shape (out may
/// be in for Store), but a Narrow item's out, which is of dtype `precision`. On a GPU one kernel
/// launch for up to 64 tensors (multi-tensor apply, kernels/multi_tensor_apply.h) where
/// round_to_precision and axpy take one or two each; the bits are theirs. An empty list does
/// nothing; DTypeError, DeviceError, ShapeError name the item.
void round_to_precision_multi(const std::vector<RoundedCast>& items, DType precision);

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
template <typename T>
void round_into_cpu(void* out, const float* in, int64_t n, RoundedInto how);
/// outs[k], ins[k], sizes[k], how[k]: the items, in multi-tensor launches on `stream`.
template <typename T>
void round_to_precision_multi_cuda(const std::vector<void*>& outs,
                                   const std::vector<const float*>& ins,
                                   const std::vector<int64_t>& sizes,
                                   const std::vector<RoundedInto>& how, CUstream_st* stream);

}  // namespace minitrain
