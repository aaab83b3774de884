#pragma once
// torch.nn's elementwise losses behind nn/loss.h: L1Loss, SmoothL1Loss (beta), HuberLoss (delta),
// BCEWithLogitsLoss (pos_weight, one per output column) and KLDivLoss (log_target). One base,
// PointwiseLoss, runs all five through kernels/loss/pointwise_loss.h; each subclass checks its own
// settings. Each takes the LossOptions that make_loss gets (its name set to the class's own:
// L1Loss() is "l1").

#include "kernels/loss/pointwise_loss.h"
#include "nn/loss.h"

namespace minitrain {

class PointwiseLoss : public Loss {
 public:
  /// ShapeError naming both shapes when pred and target differ in shape (and, for
  /// bce_with_logits, when pos_weight does not have pred's last extent of entries).
  Tensor forward(const Tensor& pred, const Tensor& target) override;
  Tensor backward() override;
  /// One pass over pred and target (the fused kernel); equal to forward then backward, bit for bit.
  Tensor forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred) override;
  PointwiseLossKind kind() const noexcept { return kind_; }

 protected:
  PointwiseLoss(LossOptions options, PointwiseLossKind kind, double param);

 private:
  void check_shapes(const Tensor& pred, const Tensor& target) const;
  PointwiseLossSpec spec_for(const Tensor& pred);

  PointwiseLossKind kind_;
  double param_;
  Tensor pred_, target_;
  Tensor grad_out_;    // dL/dloss = 1, kept between steps
  Tensor pos_weight_;  // options().pos_weight in pred's dtype, on its device
};

/// torch.nn.L1Loss: |pred - target|.
class L1Loss final : public PointwiseLoss {
 public:
  explicit L1Loss(LossOptions options = {});
};

/// torch.nn.SmoothL1Loss: options.beta >= 0 (ValueError otherwise); beta 0 is exactly L1Loss.
class SmoothL1Loss final : public PointwiseLoss {
 public:
  explicit SmoothL1Loss(LossOptions options = {});
};

/// torch.nn.HuberLoss: options.delta > 0 (ValueError otherwise).
class HuberLoss final : public PointwiseLoss {
 public:
  explicit HuberLoss(LossOptions options = {});
};

/// torch.nn.BCEWithLogitsLoss on logits: options.pos_weight empty (all 1) or one finite weight
/// >= 0 per output column (checked against pred's last extent at forward).
class BCEWithLogitsLoss final : public PointwiseLoss {
 public:
  explicit BCEWithLogitsLoss(LossOptions options = {});
};

/// torch.nn.KLDivLoss: pred holds log-probabilities, the target probabilities (options.log_target:
/// log-probabilities); loss = target (log target - pred), 0 where target == 0 (torch's xlogy).
/// Takes every reduction, batchmean (the sum over pred's first extent: the KL divergence per
/// sample, torch's advice) included.
class KLDivLoss final : public PointwiseLoss {
 public:
  explicit KLDivLoss(LossOptions options = {});
};

}  // namespace minitrain
