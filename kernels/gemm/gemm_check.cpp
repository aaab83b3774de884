// GEMM operand checks: what gemm() checks, as one function so that every GEMM entry point
// (gemm, matmul, gemm_with, the fused Linear forward) rejects the same input with the same words.

#include "kernels/gemm/gemm_check.h"

#include <cstdint>
#include <string>
#include <utility>

#include "core/error.h"
#include "kernels/check.h"

namespace minitrain {

namespace {

struct Dims {
  int64_t rows, cols;
};

Dims op_dims(const Tensor& t, bool trans) {
  return trans ? Dims{t.size(1), t.size(0)} : Dims{t.size(0), t.size(1)};
}

// "op(b) is [8, 16] (b [16, 8], transposed)"
std::string describe(const char* name, const Tensor& t, bool trans) {
  const Dims d = op_dims(t, trans);
  return detail::concat("op(", name, ") is [", d.rows, ", ", d.cols, "] (", name, " ", t.shape(),
                        trans ? ", transposed)" : ")");
}

bool overlaps(const Tensor& x, const Tensor& y) {
  if (x.nbytes() == 0 || y.nbytes() == 0) return false;
  const auto x0 = reinterpret_cast<std::uintptr_t>(x.raw_data());
  const auto y0 = reinterpret_cast<std::uintptr_t>(y.raw_data());
  return x0 < y0 + y.nbytes() && y0 < x0 + x.nbytes();
}

}  // namespace

namespace {

// check_gemm_inputs after check_compatible.
GemmDims input_dims(const char* op, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b) {
  check_ndim(op, {"a", a}, 2);
  check_ndim(op, {"b", b}, 2);
  const Dims op_a = op_dims(a, trans_a), op_b = op_dims(b, trans_b);
  MT_CHECK_AS(ShapeError, op_a.cols == op_b.rows, op,
              ": inner dimensions differ: ", describe("a", a, trans_a), ", ",
              describe("b", b, trans_b));
  return {op_a.rows, op_b.cols, op_a.cols};
}

// check_gemm_operands after check_compatible.
GemmDims operand_dims(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                      const Tensor& b, bool trans_b) {
  check_ndim(op, {"c", c}, 2);
  const GemmDims d = input_dims(op, a, trans_a, b, trans_b);
  MT_CHECK_AS(ShapeError, c.size(0) == d.m && c.size(1) == d.n, op, ": c is ", c.shape(),
              " but op(a) op(b) is [", d.m, ", ", d.n, "]: ", describe("a", a, trans_a), ", ",
              describe("b", b, trans_b));
  MT_CHECK_AS(ValueError, !overlaps(c, a) && !overlaps(c, b), op, ": c shares memory with ",
              overlaps(c, a) ? "a" : "b", "; write the product into a separate tensor");
  return d;
}

}  // namespace

GemmDims check_gemm_inputs(const char* op, const Tensor& a, bool trans_a, const Tensor& b,
                           bool trans_b) {
  check_compatible(op, {{"a", a}, {"b", b}});
  return input_dims(op, a, trans_a, b, trans_b);
}

GemmDims check_gemm_operands(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                             const Tensor& b, bool trans_b) {
  check_compatible(op, {{"c", c}, {"a", a}, {"b", b}});
  return operand_dims(op, c, a, trans_a, b, trans_b);
}

GemmDims check_gemm_mixed_operands(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                                   const Tensor& b, bool trans_b, const Tensor& bias) {
  const std::pair<const char*, const Tensor*> operands[] = {{"c", &c}, {"a", &a}, {"b", &b}};
  for (const auto& [name, t] : operands) {
    check_compatible(op, {{name, *t}});  // defined, on an available device
    MT_CHECK_AS(DTypeError,
                t->dtype() == DType::Float32 || t->dtype() == DType::BFloat16 ||
                    t->dtype() == DType::Float16,
                op, ": ", name, " is ", t->dtype(),
                "; a mixed-precision GEMM takes float32, bfloat16 or float16 operands");
    MT_CHECK_AS(DeviceError, t->device() == c.device(), op, ": ", name, " is on ", t->device(),
                " but c is on ", c.device(), "; move the operands to one device");
  }
  const GemmDims d = operand_dims(op, c, a, trans_a, b, trans_b);
  if (bias.defined()) {
    check_compatible(op, {{"bias", bias}});
    MT_CHECK_AS(DTypeError, bias.dtype() == DType::Float32, op, ": bias is ", bias.dtype(),
                "; the mixed GEMM's bias is float32 (a 16-bit bias: widen it first)");
    MT_CHECK_AS(DeviceError, bias.device() == c.device(), op, ": bias is on ", bias.device(),
                " but c is on ", c.device());
    MT_CHECK_AS(ShapeError, bias.ndim() == 1 && bias.size(0) == d.n, op, ": bias is ", bias.shape(),
                " but c has ", d.n, " columns (c ", c.shape(), ")");
  }
  return d;
}

}  // namespace minitrain
