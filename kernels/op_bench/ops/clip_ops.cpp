// Gradient clipping's total norm (optim/clip.h, issue 35): the sum of squares of a model's
// gradient list, n elements over 8 tensors of a 3-layer MLP's shapes (two large weights, odd
// biases, a one-element bias), in float64, written as float32. Memory-bound for large n; for a
// small model's gradients the launches are the cost, which is what the multi-tensor variant
// saves (2 launches against 4 per tensor).

#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/multi_tensor_norm.h"
#include "kernels/op_bench/op_registry.h"
#include "kernels/reduce.h"

namespace minitrain::opbench {
namespace {

// n elements cut as a Linear stack's gradients: w0 (about n/2), b0 (odd), w1 (about n/2 - ...),
// b1, w2, b2, then a 3-element and a 1-element tensor; every size >= 1.
std::vector<int64_t> list_sizes(int64_t n) {
  std::vector<int64_t> s = {0, 17, 0, 13, 5, 3, 3, 1};
  int64_t rest = n - (17 + 13 + 5 + 3 + 3 + 1);
  if (rest < 2) rest = 2;
  s[0] = rest / 2;
  s[2] = rest - s[0];
  return s;
}

// The per-tensor path's ops (squared_norm, a widening cast, an add) or the list's two launches;
// both end in the same cast of the float64 total to the family's float32 output.
void run_total(OpTensors& t, bool multi) {
  const Device d = t.out[0].device();
  Tensor total = Tensor::empty(Shape{}, DType::Float64, d);
  if (multi) {
    squared_norm_multi(total, t.in);
  } else {
    for (std::size_t k = 0; k < t.in.size(); ++k) {
      Tensor sq = cast(squared_norm(t.in[k]), DType::Float64);
      if (k == 0)
        total = sq;
      else
        add(total, total, sq);
    }
  }
  cast(t.out[0], total);
}

OpFamily clip_total_norm_op() {
  OpFamily f;
  f.name = "clip_grad_norm_sum_sq";
  f.what = "sum of x^2 over 8 gradient tensors (n elements in all), float64 total: one read";
  f.make = [](int64_t n, Device d) {
    OpTensors t;
    uint64_t seed = 1;
    for (int64_t size : list_sizes(n)) t.in.push_back(uniform({size}, d, seed++));
    t.out.push_back(Tensor::empty({}, DType::Float32, d));
    return t;
  };
  f.reference = [](OpTensors& t) {
    double acc = 0;
    for (const Tensor& x : t.in)
      for (int64_t i = 0; i < x.numel(); ++i)
        acc += double(x.data<float>()[i]) * x.data<float>()[i];
    t.out[0].data<float>()[0] = static_cast<float>(acc);
  };
  f.bytes = [](int64_t n) { return 4.0 * double(n); };
  f.flops = [](int64_t n) { return 2.0 * double(n); };
  f.tolerance = 1e-6;  // each tensor's sum is rounded to float32 before the total (torch's too)
  f.variants.push_back(
      {"multi_tensor",
       "every tensor's block partials in one launch, one block folds them in order",
       {DeviceType::CPU, DeviceType::CUDA},
       [](OpTensors& t) { run_total(t, true); }});
  f.variants.push_back({"per_tensor",
                        "squared_norm, a cast and an add per tensor (4 launches each on a GPU)",
                        {DeviceType::CPU, DeviceType::CUDA},
                        [](OpTensors& t) { run_total(t, false); }});
  return f;
}

}  // namespace
}  // namespace minitrain::opbench

MINITRAIN_REGISTER_OP(clip_grad_norm_sum_sq, minitrain::opbench::clip_total_norm_op())
