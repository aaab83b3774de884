// Reductions (kernels/reduce.h): sum and squared norm of n floats to one value, and the column
// sums of a [rows, cols] matrix (a bias gradient). Memory-bound: one read of the input. The
// references accumulate in double, as the kernels do; the kernels' summation order differs
// (blocks, threads), hence the tolerance.

#include "kernels/op_bench/op_registry.h"
#include "kernels/reduce.h"

namespace minitrain::opbench {
namespace {

constexpr double kF = 4.0;

OpFamily total_op(const std::string& name, bool squared) {
  OpFamily f;
  f.name = name;
  f.what = squared ? "out = sum(x^2) of n floats (double accumulator): one read"
                   : "out = sum(x) of n floats (double accumulator): one read";
  f.make = [](int64_t n, Device d) {
    return OpTensors{{uniform({n}, d, 1)}, {Tensor::empty({}, DType::Float32, d)}};
  };
  f.reference = [squared](OpTensors& t) {
    const float* x = t.in[0].data<float>();
    double acc = 0;
    for (int64_t i = 0; i < t.in[0].numel(); ++i) acc += squared ? double(x[i]) * x[i] : x[i];
    t.out[0].data<float>()[0] = static_cast<float>(acc);
  };
  f.bytes = [](int64_t n) { return kF * double(n); };
  f.flops = [squared](int64_t n) { return (squared ? 2.0 : 1.0) * double(n); };
  f.tolerance = 1e-6;
  f.variants.push_back({"two_pass",
                        "block partials in double, then one block over them",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [squared](OpTensors& t) {
                          if (squared)
                            squared_norm(t.out[0], t.in[0]);
                          else
                            sum(t.out[0], t.in[0]);
                        }});
  return f;
}

OpFamily sum_rows_op() {
  OpFamily f;
  f.name = "sum_rows";
  f.what = "out[c] = sum over rows of x[r, c], x [n / c, c] (a bias gradient): one read";
  f.make = [](int64_t n, Device d) {
    const Shape s = matrix_shape(n);
    return OpTensors{{uniform(s, d, 1)}, {Tensor::empty({s[1]}, DType::Float32, d)}};
  };
  f.reference = [](OpTensors& t) {
    const int64_t rows = t.in[0].shape()[0], cols = t.in[0].shape()[1];
    const float* x = t.in[0].data<float>();
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t r = 0; r < rows; ++r) acc += x[r * cols + c];
      t.out[0].data<float>()[c] = static_cast<float>(acc);
    }
  };
  f.bytes = [](int64_t n) { return kF * double(n); };
  f.flops = [](int64_t n) { return double(n); };
  f.tolerance = 1e-6;
  f.variants.push_back({"column_sliced",
                        "row slices per block, column sums in double",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { sum_rows(t.out[0], t.in[0]); }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(sum, minitrain::opbench::total_op("sum", false))
MINITRAIN_REGISTER_OP(squared_norm, minitrain::opbench::total_op("squared_norm", true))
MINITRAIN_REGISTER_OP(sum_rows, minitrain::opbench::sum_rows_op())
