#pragma once
// The large-layer training step of issue 16's "CPU paths at their limit", shared by the
// benchmarks that measure it: mlp:256,1024,1024,1 with ReLU, batch 256, float32, on the CPU;
// forward, MSE (mean), zero_grad, backward and the optimizer's step, the loss read on the host,
// as minitrain train's loop does (the loader is not timed). Its GEMMs are listed by step_gemms,
// so that a benchmark can time exactly those shapes alone.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_inputs.h"
#include "core/generator.h"
#include "core/tensor.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"

namespace minitrain::bench {

inline const std::vector<int64_t> kLargeStepWidths = {256, 1024, 1024, 1};
inline constexpr int64_t kLargeStepBatch = 256;

/// The model, its optimizer (optimizer_config's settings) and one fixed batch.
class LargeStep {
 public:
  explicit LargeStep(const std::string& optimizer)
      : gen_(0),
        model_(make_mlp(kLargeStepWidths, Activation::ReLU, gen_, Device::cpu())),
        x_(filled(kLargeStepBatch, kLargeStepWidths.front(), 1)),
        y_(filled(kLargeStepBatch, kLargeStepWidths.back(), 2)) {
    model_->set_needs_input_grad(false);  // as minitrain train does
    opt_ = make_optimizer(optimizer_config(optimizer), model_->named_parameters());
  }

  /// One training step; returns its loss.
  double run() {
    Tensor l = loss_fn_.forward(model_->forward(x_), y_);
    opt_->zero_grad();
    model_->backward(loss_fn_.backward());
    opt_->step();
    return l.item();
  }

 private:
  Generator gen_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Optimizer> opt_;
  MSELoss loss_fn_;
  Tensor x_, y_;
};

/// One GEMM of a step: C[m, n] = op(A) op(B) + beta C, row-major.
struct StepGemm {
  std::string name;  ///< "l1_fwd_xWt_256x1024x1024": layer, role, m x n x k
  int64_t m, n, k;
  bool trans_a, trans_b;
  float beta;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

/// The GEMMs Linear makes in one training step of an MLP with these widths, in the order the step
/// makes them: forward y = x W^T per layer; then from the last layer back, dW = dy^T x (beta 0:
/// the gradient zero_grad released is overwritten, Note [released gradients] in nn/parameter.h)
/// and dx = dy W, which the first layer skips (no gradient for the data).
inline std::vector<StepGemm> step_gemms(const std::vector<int64_t>& widths, int64_t batch) {
  auto dims = [](int64_t m, int64_t n, int64_t k) {
    return "_" + std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  };
  std::vector<StepGemm> out;
  for (size_t l = 0; l + 1 < widths.size(); ++l) {
    const int64_t in = widths[l], out_features = widths[l + 1];
    out.push_back({"l" + std::to_string(l) + "_fwd_xWt" + dims(batch, out_features, in), batch,
                   out_features, in, false, true, 0.f});
  }
  for (size_t l = widths.size() - 1; l-- > 0;) {
    const int64_t in = widths[l], out_features = widths[l + 1];
    const std::string p = "l" + std::to_string(l);
    out.push_back({p + "_bwd_dytx" + dims(out_features, in, batch), out_features, in, batch, true,
                   false, 0.f});
    if (l > 0)
      out.push_back({p + "_bwd_dyW" + dims(batch, in, out_features), batch, in, out_features, false,
                     false, 0.f});
  }
  return out;
}

/// Operands for one StepGemm: A and B as the GEMM reads them, C as it writes it.
struct StepGemmOperands {
  Tensor a, b, c;
  explicit StepGemmOperands(const StepGemm& g)
      : a(g.trans_a ? filled(g.k, g.m, 1) : filled(g.m, g.k, 1)),
        b(g.trans_b ? filled(g.n, g.k, 2) : filled(g.k, g.n, 2)),
        c(filled(g.m, g.n, 3)) {}
};

}  // namespace minitrain::bench
