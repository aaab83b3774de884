#pragma once
// torch.nn's elementwise losses behind nn/loss.h (L1Loss, HuberLoss, BCEWithLogitsLoss, ...),
// one per row of MT_POINTWISE_LOSSES (kernels/loss/loss_math.h), with the setting its row names.
// One class, PointwiseLoss, runs them all through kernels/loss/pointwise_loss.h; torch's class
// names are its instances, one per row (HuberLoss is PointwiseLossOf<PointwiseLossKind::Huber>).
// Each
// takes the LossOptions that make_loss gets (its name set to the row's own: L1Loss() is "l1") and
// every reduction.

#include <optional>

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
  void release_inputs() noexcept override {
    pred_ = Tensor();
    target_ = Tensor();
  }
  PointwiseLossKind kind() const noexcept { return kind_; }

 protected:
  /// The row's setting read from `options` into the kernel's spec, whose constructor is its one
  /// check: OptionError naming it and its value out of range (the Math's param_ok); ValueError for
  /// a pos_weight < 0 or not finite.
  PointwiseLoss(LossOptions options, PointwiseLossKind kind);

 private:
  void check_shapes(const Tensor& pred, const Tensor& target) const;
  PointwiseLossSpec spec_for(const Tensor& pred);

  PointwiseLossKind kind_;
  std::optional<LossSetting> setting_;  ///< the row's setting column, none for l1
  PointwiseLossSpec spec_;              ///< the kind and the setting's value, checked
  Tensor pred_, target_;
  Tensor grad_out_;    // dL/dloss = 1, kept between steps
  Tensor pos_weight_;  // options().pos_weight in pred's dtype, on its device
};

/// The loss of one row: `PointwiseLossOf<PointwiseLossKind::Huber> loss(options);`.
template <PointwiseLossKind K>
class PointwiseLossOf final : public PointwiseLoss {
 public:
  explicit PointwiseLossOf(LossOptions options = {}) : PointwiseLoss(std::move(options), K) {}
};

// torch.nn's name for each row: `HuberLoss loss(options);`, `dynamic_cast<L1Loss*>(...)`.
#define MT_POINTWISE_LOSS_CLASS(Kind, name, TorchClass, Math, setting) \
  using TorchClass = PointwiseLossOf<PointwiseLossKind::Kind>;
MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_CLASS)
#undef MT_POINTWISE_LOSS_CLASS

}  // namespace minitrain
