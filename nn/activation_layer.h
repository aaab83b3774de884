#pragma once
// Parameter-free activation layers (torch.nn.ReLU, GELU(), GELU(approximate='tanh'), Tanh,
// Sigmoid) over kernels/activation.h. Backward needs the forward input, which forward caches.

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

 private:
  Activation kind_;
  Tensor input_;
};

}  // namespace minitrain
