// The elementwise losses over kernels/loss/pointwise_loss.h: forward keeps pred and target
// (handles), backward seeds dL/dloss = 1, forward_backward runs the fused kernel.

#include "nn/pointwise_loss.h"

#include <cmath>

#include "nn/loss_support.h"

namespace minitrain {

PointwiseLoss::PointwiseLoss(LossOptions options, PointwiseLossKind kind, double param)
    : Loss(std::move(options)), kind_(kind), param_(param) {
  options_.name = pointwise_loss_name(kind);
}

void PointwiseLoss::check_shapes(const Tensor& pred, const Tensor& target) const {
  MT_CHECK(pred.defined() && target.defined(), name(), ": pred or target is an undefined tensor");
  MT_CHECK_AS(ShapeError, pred.shape() == target.shape(), name(), ": pred ", pred.shape(),
              " and target ", target.shape(),
              " differ in shape; the model's output must match the targets (check the last "
              "layer's size and the target columns)");
}

PointwiseLossSpec PointwiseLoss::spec_for(const Tensor& pred) {
  if (kind_ != PointwiseLossKind::BceWithLogits) return {kind_, param_, Tensor()};
  const int64_t cols = pred.ndim() == 0 ? 1 : pred.size(pred.ndim() - 1);
  const size_t given = options_.pos_weight.size();
  MT_CHECK_AS(ShapeError, given == 0 || given == 1 || int64_t(given) == cols, name(),
              ": pos_weight has ", given, " entries but pred ", pred.shape(), " has ", cols,
              " columns; give one weight per output column");
  return {kind_, param_, cached_weights(pos_weight_, options_.pos_weight, pred)};
}

Tensor PointwiseLoss::forward(const Tensor& pred, const Tensor& target) {
  check_shapes(pred, target);
  Tensor loss = pointwise_loss_forward(pred, target, spec_for(pred), options_.reduction);
  pred_ = pred;
  target_ = target;
  return loss;
}

Tensor PointwiseLoss::backward() {
  MT_CHECK(pred_.defined(), name(), ": backward called before forward");
  const Shape grad_shape = options_.reduction == Reduction::None ? pred_.shape() : Shape{};
  return pointwise_loss_backward(cached_ones(grad_out_, grad_shape, pred_.dtype(), pred_.device()),
                                 pred_, target_, spec_for(pred_), options_.reduction);
}

Tensor PointwiseLoss::forward_backward(const Tensor& pred, const Tensor& target,
                                       Tensor& grad_pred) {
  check_shapes(pred, target);
  Tensor loss = Tensor::empty(options_.reduction == Reduction::None ? pred.shape() : Shape{},
                              pred.dtype(), pred.device());
  grad_pred = Tensor::empty(pred.shape(), pred.dtype(), pred.device());
  pointwise_loss_forward_backward(loss, grad_pred, pred, target, spec_for(pred),
                                  options_.reduction);
  pred_ = pred;
  target_ = target;
  return loss;
}

L1Loss::L1Loss(LossOptions options) : PointwiseLoss(std::move(options), PointwiseLossKind::L1, 0) {}

SmoothL1Loss::SmoothL1Loss(LossOptions options)
    : PointwiseLoss(options, PointwiseLossKind::SmoothL1, options.beta) {
  check_loss_setting(std::isfinite(options_.beta) && options_.beta >= 0, name(), "beta",
                     "finite and >= 0", options_.beta);
}

HuberLoss::HuberLoss(LossOptions options)
    : PointwiseLoss(options, PointwiseLossKind::Huber, options.delta) {
  check_loss_setting(std::isfinite(options_.delta) && options_.delta > 0, name(), "delta",
                     "finite and > 0", options_.delta);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(LossOptions options)
    : PointwiseLoss(std::move(options), PointwiseLossKind::BceWithLogits, 0) {
  check_loss_weights(name(), "pos_weight", options_.pos_weight);
}

KLDivLoss::KLDivLoss(LossOptions options)
    : PointwiseLoss(options, PointwiseLossKind::KlDiv, options.log_target ? 1.0 : 0.0) {}

}  // namespace minitrain
