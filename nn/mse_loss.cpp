// MSELoss over kernels/loss/mse_loss.h: forward keeps pred and target (handles), backward seeds
// dL/dloss = 1 and returns dL/dpred in one element-wise pass, forward_backward runs the fused
// kernel.

#include "nn/mse_loss.h"

#include "kernels/loss/mse_loss.h"
#include "nn/loss_support.h"

namespace minitrain {

MSELoss::MSELoss(Reduction reduction) : MSELoss(LossOptions{"mse", reduction}) {}

MSELoss::MSELoss(LossOptions options) : Loss(std::move(options)) { options_.name = "mse"; }

void MSELoss::check_shapes(const Tensor& pred, const Tensor& target) const {
  MT_CHECK(pred.defined() && target.defined(), "mse_loss: pred or target is an undefined tensor");
  MT_CHECK_AS(ShapeError, pred.shape() == target.shape(), "mse_loss: pred ", pred.shape(),
              " and target ", target.shape(),
              " differ in shape; the model's output must match "
              "the targets (check the last layer's size and the target columns)");
}

Tensor MSELoss::forward(const Tensor& pred, const Tensor& target) {
  check_shapes(pred, target);
  // Kept across calls as forward_backward's (an evaluation's batches: issue 35).
  Tensor loss = value_buffer_.get(options_.reduction == Reduction::None ? pred.shape() : Shape{},
                                  pred.dtype(), pred.device());
  mse_loss_forward(loss, pred, target, options_.reduction, workspace_);
  pred_ = pred;
  target_ = target;
  return loss;
}

Tensor MSELoss::backward() {
  MT_CHECK(pred_.defined(), "mse_loss: backward called before forward");
  const Shape grad_shape = options_.reduction == Reduction::None ? pred_.shape() : Shape{};
  return mse_loss_backward(cached_ones(grad_out_, grad_shape, pred_.dtype(), pred_.device()), pred_,
                           target_, options_.reduction);
}

Tensor MSELoss::forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred) {
  check_shapes(pred, target);
  Tensor loss = value_buffer_.get(options_.reduction == Reduction::None ? pred.shape() : Shape{},
                                  pred.dtype(), pred.device());
  grad_pred = grad_buffer_.get(pred.shape(), pred.dtype(), pred.device());
  mse_loss_forward_backward(loss, grad_pred, pred, target, options_.reduction, workspace_);
  pred_ = pred;
  target_ = target;
  return loss;
}

}  // namespace minitrain
