// Activation layers: forward writes a fresh output and keeps the input (a handle) for backward,
// which is one element-wise pass, grad_x = grad_y * f'(x). A bfloat16/float16 input (mixed
// precision) goes through the kernels' 16-bit path (computed in float32, rounded once, as torch's
// CPU and CUDA kernels do for these types; tanh and sigmoid differentiate from the rounded output,
// as torch does); the cached input stays 16-bit, which is the memory it saves.

#include "nn/activation_layer.h"

#include "kernels/cast.h"

namespace minitrain {

Tensor ActivationLayer::forward(const Tensor& x) {
  MT_CHECK(x.defined(), activation_name(kind_), ": input is an undefined tensor");
  Tensor y = out_.get(x.shape(), x.dtype(), x.device());
  activation_forward(y, x, kind_);
  input_ = training_ ? x : Tensor();
  return y;
}

Tensor ActivationLayer::backward(const Tensor& grad_output) {
  MT_CHECK(input_.defined(), repr(),
           ": backward called without a preceding training-mode "
           "forward (call train() before forward; eval mode keeps nothing for backward)");
  MT_CHECK(grad_output.defined(), repr(), ": grad_output is an undefined tensor");
  MT_CHECK_AS(ShapeError, grad_output.shape() == input_.shape(), repr(), ": grad_output is ",
              grad_output.shape(), " but the forward output was ", input_.shape());
  if (!needs_input_grad_) return Tensor();
  // A float32 gradient for a 16-bit input (a caller outside the trainer) is rounded first, as
  // torch's cast would.
  Tensor grad_x = grad_in_.get(input_.shape(), input_.dtype(), input_.device());
  if (is_half(input_.dtype()) && grad_output.dtype() != input_.dtype())
    activation_backward(grad_x, cast(grad_output, input_.dtype()), input_, kind_);
  else
    activation_backward(grad_x, grad_output, input_, kind_);
  return grad_x;
}

void ActivationLayer::to(Device device) {
  Module::to(device);
  input_ = Tensor();
  out_.clear();
  grad_in_.clear();
}

std::string ActivationLayer::repr() const { return activation_torch_repr(kind_); }

}  // namespace minitrain
