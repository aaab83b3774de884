// The elementwise losses over kernels/loss/pointwise_loss.h: forward keeps pred and target
// (handles), backward seeds dL/dloss = 1, forward_backward runs the fused kernel.

#include "nn/pointwise_loss.h"

#include "nn/loss_support.h"

namespace minitrain {

PointwiseLoss::PointwiseLoss(LossOptions options, PointwiseLossKind kind)
    : Loss(std::move(options)), kind_(kind) {
  options_.name = pointwise_loss_name(kind);
  const std::vector<LossSetting> setting = loss_settings_named(pointwise_loss_setting(kind));
  double param = 0;
  if (!setting.empty()) {
    setting_ = setting.front();
    param = loss_setting_value(options_, *setting_);
  }
  spec_ = PointwiseLossSpec(kind_, param);
  if (setting_ == LossSetting::PosWeight)
    check_loss_weights(name(), "pos_weight", options_.pos_weight);
}

void PointwiseLoss::check_shapes(const Tensor& pred, const Tensor& target) const {
  MT_CHECK(pred.defined() && target.defined(), name(), ": pred or target is an undefined tensor");
  MT_CHECK_AS(ShapeError, pred.shape() == target.shape(), name(), ": pred ", pred.shape(),
              " and target ", target.shape(),
              " differ in shape; the model's output must match the targets (check the last "
              "layer's size and the target columns)");
}

PointwiseLossSpec PointwiseLoss::spec_for(const Tensor& pred) {
  if (setting_ != LossSetting::PosWeight) return spec_;
  const int64_t cols = pred.ndim() == 0 ? 1 : pred.size(pred.ndim() - 1);
  const size_t given = options_.pos_weight.size();
  MT_CHECK_AS(ShapeError, given == 0 || given == 1 || int64_t(given) == cols, name(),
              ": pos_weight has ", given, " entries but pred ", pred.shape(), " has ", cols,
              " columns; give one weight per output column");
  return spec_.with_pos_weight(cached_weights(pos_weight_, options_.pos_weight, pred));
}

Tensor PointwiseLoss::forward(const Tensor& pred, const Tensor& target) {
  check_shapes(pred, target);
  // Kept across calls as forward_backward's (an evaluation's batches: issue 35).
  Tensor loss = value_buffer_.get(options_.reduction == Reduction::None ? pred.shape() : Shape{},
                                  pred.dtype(), pred.device());
  pointwise_loss_forward(loss, pred, target, spec_for(pred), options_.reduction, workspace_);
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
  Tensor loss = value_buffer_.get(options_.reduction == Reduction::None ? pred.shape() : Shape{},
                                  pred.dtype(), pred.device());
  grad_pred = grad_buffer_.get(pred.shape(), pred.dtype(), pred.device());
  pointwise_loss_forward_backward(loss, grad_pred, pred, target, spec_for(pred), options_.reduction,
                                  workspace_);
  pred_ = pred;
  target_ = target;
  return loss;
}

}  // namespace minitrain
