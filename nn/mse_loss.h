#pragma once
// torch.nn.MSELoss: mean (default), sum, none or batchmean of (pred - target)^2, a Loss like the
// others (make_loss({"mse"}) makes one). forward_backward, the training step's call, runs the fused
// kernel (kernels/loss/mse_loss.h): loss and gradient from one read of pred and target, bit for bit
// forward's and backward's.

#include "core/tensor.h"
#include "nn/loss.h"

namespace minitrain {

class MSELoss final : public Loss {
 public:
  explicit MSELoss(Reduction reduction = Reduction::Mean);
  /// options.name is set to "mse"; every reduction, batchmean included.
  explicit MSELoss(LossOptions options);
  /// 0-d loss for mean/sum, pred's shape for none; ShapeError names both shapes on mismatch.
  Tensor forward(const Tensor& pred, const Tensor& target) override;
  /// dL/dpred for the last forward, with dL/dloss = 1 (ones for reduction none).
  Tensor backward() override;
  Tensor forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred) override;
  void release_inputs() noexcept override {
    pred_ = Tensor();
    target_ = Tensor();
  }
  Reduction reduction() const noexcept { return options_.reduction; }

 private:
  void check_shapes(const Tensor& pred, const Tensor& target) const;
  Tensor pred_, target_;
  Tensor grad_out_;  // dL/dloss = 1, kept between steps (same shape, dtype and device)
};

}  // namespace minitrain
