#pragma once
// torch.nn.MSELoss: mean (default), sum or none of (pred - target)^2. Not a Module: it takes two
// inputs and starts the backward pass (dL/dL = 1).

#include "kernels/loss/mse_loss.h"
#include "core/tensor.h"

namespace minitrain {

class MSELoss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean) : reduction_(reduction) {}
  /// 0-d loss for mean/sum, pred's shape for none; ShapeError names both shapes on mismatch.
  Tensor forward(const Tensor& pred, const Tensor& target);
  /// dL/dpred for the last forward, with dL/dloss = 1 (ones for reduction none).
  Tensor backward();
  Reduction reduction() const noexcept { return reduction_; }

 private:
  Reduction reduction_;
  Tensor pred_, target_;
  Tensor grad_out_;  // dL/dloss = 1, kept between steps (same shape, dtype and device)
};

}  // namespace minitrain
