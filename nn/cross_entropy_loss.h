#pragma once
// torch.nn.CrossEntropyLoss behind nn/loss.h: logits [N, C] and one class index per row ([N] or
// [N, 1], in the logits' dtype), with options.class_weights, label_smoothing, ignore_index and
// reduction. The fused kernel (kernels/loss/cross_entropy.h) gives forward_backward in one pass.

#include "kernels/loss/cross_entropy.h"
#include "nn/loss.h"

namespace minitrain {

class CrossEntropyLoss final : public Loss {
 public:
  /// ValueError for label_smoothing outside [0, 1] or a class weight that is negative or not
  /// finite, naming the setting and its value. options.name becomes "cross_entropy".
  explicit CrossEntropyLoss(LossOptions options = {});
  TargetKind target_kind() const noexcept override { return TargetKind::ClassIndices; }

  /// 0-d for mean/sum, [N] for none. ShapeError when the shapes do not fit (class_weights' length
  /// against C included, naming both); ValueError naming the row, value and C for a bad index.
  Tensor forward(const Tensor& logits, const Tensor& classes) override;
  Tensor backward() override;
  Tensor forward_backward(const Tensor& logits, const Tensor& classes,
                          Tensor& grad_logits) override;
  void release_inputs() noexcept override {
    logits_ = Tensor();
    classes_ = Tensor();
  }

  /// Note [cross_entropy's targets on the device]: a float64 [3] on the logits' CUDA device makes
  /// the calls check their labels (and class weights) there, for the caller to read later;
  /// undefined (the default) checks each call's labels on the host.
  void set_target_check(Tensor check) { target_check_ = std::move(check); }
  /// Note [a batch that counts nothing, on the device] (kernels/loss/cross_entropy.h), with a
  /// target check: a call with a mean divisor above 0 adds 1 to `count` (float64 [1]); one with
  /// divisor 0 gives a loss of 0 and a zero gradient; `skip` (float32 [1], optional) is then 1
  /// while the count is 0. Undefined tensors (the default): torch's NaN for such a call.
  void set_batch_count(Tensor count, Tensor skip = Tensor()) {
    batch_count_ = std::move(count);
    skip_flag_ = std::move(skip);
  }

 private:
  CrossEntropySpec spec_for(const Tensor& logits);

  Tensor logits_, classes_;
  Tensor grad_out_;                 // dL/dloss = 1, kept between steps
  Tensor class_weights_;            // options().class_weights in the logits' dtype, on their device
  Tensor target_check_;             // set_target_check's
  Tensor batch_count_, skip_flag_;  // set_batch_count's
};

}  // namespace minitrain
