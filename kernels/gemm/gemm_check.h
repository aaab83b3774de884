#pragma once
// The operand checks of a GEMM entry point, shared by gemm and matmul (kernels/gemm/gemm.cpp),
// gemm_with (kernels/gemm/gemm_registry.cpp) and the fused Linear forward
// (kernels/linear_layer.cpp), with the same messages as gemm():
//   "gemm_with: inner dimensions differ: op(a) is [8, 16] (a [8, 16]), op(b) is [8, 4] (b [8, 4])"

#include <cstdint>

#include "core/tensor.h"

namespace minitrain {

/// The m, n, k of C[m, n] = op(A)[m, k] op(B)[k, n].
struct GemmDims {
  int64_t m, n, k;
};

/// Checks that a and b are defined, 2-D, on one available device with one dtype and that op(a)
/// op(b) exists; returns its dimensions (matmul, before it allocates c).
GemmDims check_gemm_inputs(const char* op, const Tensor& a, bool trans_a, const Tensor& b,
                           bool trans_b);
/// Checks that c, a, b are defined, 2-D, on one available device with one dtype, that the shapes
/// fit and that c overlaps neither input; returns the product's dimensions. Throws Error,
/// DeviceError, DTypeError, ShapeError or ValueError (overlap), each message starting with `op`.
GemmDims check_gemm_operands(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                             const Tensor& b, bool trans_b);
/// check_gemm_operands for a mixed-precision GEMM (gemm_mixed_with): c, a, b may differ in dtype,
/// each float32, bfloat16 or float16 (DTypeError otherwise); `bias`, when defined, float32 [n]
/// on c's device.
GemmDims check_gemm_mixed_operands(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                                   const Tensor& b, bool trans_b, const Tensor& bias);

}  // namespace minitrain
