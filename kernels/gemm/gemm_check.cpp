// GEMM operand checks: what gemm() checks, as one function so that every GEMM entry point
// (gemm, matmul, gemm_with, the fused Linear forward) rejects the same input with the same words.

#include "kernels/gemm/gemm_check.h"

#include <cstdint>
#include <string>

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

GemmDims check_gemm_inputs(const char* op, const Tensor& a, bool trans_a, const Tensor& b,
                           bool trans_b) {
  check_compatible(op, {{"a", a}, {"b", b}});
  check_ndim(op, {"a", a}, 2);
  check_ndim(op, {"b", b}, 2);
  const Dims op_a = op_dims(a, trans_a), op_b = op_dims(b, trans_b);
  MT_CHECK_AS(ShapeError, op_a.cols == op_b.rows, op,
              ": inner dimensions differ: ", describe("a", a, trans_a), ", ",
              describe("b", b, trans_b));
  return {op_a.rows, op_b.cols, op_a.cols};
}

GemmDims check_gemm_operands(const char* op, const Tensor& c, const Tensor& a, bool trans_a,
                             const Tensor& b, bool trans_b) {
  check_compatible(op, {{"c", c}, {"a", a}, {"b", b}});
  check_ndim(op, {"c", c}, 2);
  const GemmDims d = check_gemm_inputs(op, a, trans_a, b, trans_b);
  MT_CHECK_AS(ShapeError, c.size(0) == d.m && c.size(1) == d.n, op, ": c is ", c.shape(),
              " but op(a) op(b) is [", d.m, ", ", d.n, "]: ", describe("a", a, trans_a), ", ",
              describe("b", b, trans_b));
  MT_CHECK_AS(ValueError, !overlaps(c, a) && !overlaps(c, b), op, ": c shares memory with ",
              overlaps(c, a) ? "a" : "b", "; write the product into a separate tensor");
  return d;
}

}  // namespace minitrain
