// CrossEntropyLoss over kernels/loss/cross_entropy.h: forward keeps logits and classes (handles),
// backward seeds dL/dloss = 1, forward_backward runs the fused kernel.

#include "nn/cross_entropy_loss.h"

#include "nn/loss_support.h"

namespace minitrain {

CrossEntropyLoss::CrossEntropyLoss(LossOptions options) : Loss(std::move(options)) {
  options_.name = "cross_entropy";
  const double eps = options_.label_smoothing;
  check_loss_setting(eps >= 0 && eps <= 1, name(), "label_smoothing", "in [0, 1]", eps);
  check_loss_weights(name(), "class_weights", options_.class_weights);
}

CrossEntropySpec CrossEntropyLoss::spec_for(const Tensor& logits) {
  MT_CHECK(logits.defined(), name(), ": logits are an undefined tensor");
  CrossEntropySpec spec;
  spec.class_weights = cached_weights(class_weights_, options_.class_weights, logits);
  spec.label_smoothing = options_.label_smoothing;
  spec.ignore_index = options_.ignore_index;
  spec.target_check = target_check_;
  spec.batch_count = batch_count_;
  spec.skip_flag = skip_flag_;
  spec.workspace = &workspace_;
  return spec;
}

Tensor CrossEntropyLoss::forward(const Tensor& logits, const Tensor& classes) {
  const CrossEntropySpec spec = spec_for(logits);
  // Kept across calls as forward_backward's (an evaluation's batches: issue 35).
  Tensor loss = value_buffer_.get(options_.reduction == Reduction::None
                                      ? Shape{logits.ndim() > 0 ? logits.size(0) : 0}
                                      : Shape{},
                                  logits.dtype(), logits.device());
  cross_entropy_forward(loss, logits, classes, spec, options_.reduction);
  logits_ = logits;
  classes_ = classes;
  return loss;
}

Tensor CrossEntropyLoss::backward() {
  MT_CHECK(logits_.defined(), name(), ": backward called before forward");
  const Shape grad_shape = options_.reduction == Reduction::None ? Shape{logits_.size(0)} : Shape{};
  return cross_entropy_backward(
      cached_ones(grad_out_, grad_shape, logits_.dtype(), logits_.device()), logits_, classes_,
      spec_for(logits_), options_.reduction);
}

Tensor CrossEntropyLoss::forward_backward(const Tensor& logits, const Tensor& classes,
                                          Tensor& grad_logits) {
  const CrossEntropySpec spec = spec_for(logits);
  MT_CHECK_AS(ShapeError, logits.ndim() == 2, name(), ": logits must be [N, C] but have shape ",
              logits.shape());
  Tensor loss =
      value_buffer_.get(options_.reduction == Reduction::None ? Shape{logits.size(0)} : Shape{},
                        logits.dtype(), logits.device());
  grad_logits = grad_buffer_.get(logits.shape(), logits.dtype(), logits.device());
  cross_entropy_forward_backward(loss, grad_logits, logits, classes, spec, options_.reduction);
  logits_ = logits;
  classes_ = classes;
  return loss;
}

}  // namespace minitrain
