// Activation layers: forward writes a fresh output and keeps the input (a handle) for backward,
// which is one element-wise pass, grad_x = grad_y * f'(x). A bfloat16/float16 input (mixed
// precision) is computed on in float32 and the result rounded back, as torch's CPU and CUDA
// kernels do for these types; the cached input stays 16-bit, which is the memory it saves.

#include "nn/activation_layer.h"

#include "kernels/cast.h"

namespace minitrain {

Tensor ActivationLayer::forward(const Tensor& x) {
  MT_CHECK(x.defined(), activation_name(kind_), ": input is an undefined tensor");
  Tensor y = is_half(x.dtype())
                 ? cast(activation_forward(cast(x, DType::Float32), kind_), x.dtype())
                 : activation_forward(x, kind_);
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
  if (is_half(input_.dtype())) {
    const Tensor dy = cast(grad_output, DType::Float32);
    return cast(activation_backward(dy, cast(input_, DType::Float32), kind_), input_.dtype());
  }
  return activation_backward(grad_output, input_, kind_);
}

void ActivationLayer::to(Device device) {
  Module::to(device);
  input_ = Tensor();
}

std::string ActivationLayer::repr() const { return activation_torch_repr(kind_); }

}  // namespace minitrain
