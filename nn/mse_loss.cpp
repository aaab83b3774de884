// MSELoss over kernels/loss/mse_loss.h: forward keeps pred and target (handles), backward seeds
// dL/dloss = 1 and returns dL/dpred in one element-wise pass.

#include "nn/mse_loss.h"

#include "kernels/fill.h"

namespace minitrain {

Tensor MSELoss::forward(const Tensor& pred, const Tensor& target) {
  MT_CHECK(pred.defined() && target.defined(), "mse_loss: pred or target is an undefined tensor");
  MT_CHECK_AS(ShapeError, pred.shape() == target.shape(), "mse_loss: pred ", pred.shape(),
              " and target ", target.shape(),
              " differ in shape; the model's output must match "
              "the targets (check the last layer's size and the target columns)");
  Tensor loss = mse_loss_forward(pred, target, reduction_);
  pred_ = pred;
  target_ = target;
  return loss;
}

Tensor MSELoss::backward() {
  MT_CHECK(pred_.defined(), "mse_loss: backward called before forward");
  const Shape grad_shape = reduction_ == Reduction::None ? pred_.shape() : Shape{};
  if (!grad_out_.defined() || grad_out_.shape() != grad_shape ||
      grad_out_.dtype() != pred_.dtype() || grad_out_.device() != pred_.device()) {
    grad_out_ = Tensor::empty(grad_shape, pred_.dtype(), pred_.device());
    fill(grad_out_, 1.0);
  }
  return mse_loss_backward(grad_out_, pred_, target_, reduction_);
}

}  // namespace minitrain
