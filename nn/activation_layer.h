#pragma once
// Parameter-free activation layers (torch.nn.ReLU, GELU(), GELU(approximate='tanh'), Tanh,
// Sigmoid) over kernels/activation.h. Backward needs the forward input, which forward caches.

#include "core/buffer_slot.h"
#include "kernels/activation.h"
#include "nn/module.h"

namespace minitrain {

class ActivationLayer final : public Module {
 public:
  explicit ActivationLayer(Activation kind) : kind_(kind) {}
  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_output) override;
  void to(Device device) override;
  std::string repr() const override;  ///< "ReLU()", "GELU(approximate='none')", ...
  Activation kind() const noexcept { return kind_; }

  /// Sequential's fusion with the Linear before it (Linear::forward_activation computed this
  /// layer's output): keeps `x` as this layer's input, as forward(x) would.
  void keep_fused_input(const Tensor& x) { input_ = training_ ? x : Tensor(); }
  /// The input the last training-mode forward kept; undefined before one and in eval mode.
  const Tensor& kept_input() const noexcept { return input_; }

 private:
  Activation kind_;
  Tensor input_;
  // Note [buffers that live across steps] (core/buffer_slot.h): the output and the input
  // gradient, rewritten each step when no one else holds them; dropped by to().
  BufferSlot out_, grad_in_;
};

}  // namespace minitrain
