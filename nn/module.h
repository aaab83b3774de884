#pragma once
// The layer interface. Forward and backward are explicit (no autograd tape): forward caches what
// backward needs (in training mode), backward takes dL/dy of the last forward, ACCUMULATES
// dL/dparam into each parameter's grad and returns dL/dx.

#include <cstdint>
#include <string>

#include "core/device.h"
#include "core/tensor.h"
#include "nn/parameter.h"

namespace minitrain {

class Module {
 public:
  virtual ~Module() = default;
  Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// y = f(x). In training mode keeps what backward needs; in eval mode keeps nothing.
  virtual Tensor forward(const Tensor& x) = 0;
  /// dL/dx for the last training-mode forward; throws Error if there was none.
  virtual Tensor backward(const Tensor& grad_output) = 0;

  /// This module's parameters and its children's, names prefixed with `prefix` (torch's rule:
  /// a child registered as "0" contributes "0.weight"; the prefix includes the dot, "0.").
  /// The base version has none (parameter-free layers).
  virtual NamedParameters named_parameters(const std::string& prefix = "");
  /// Moves every parameter (and gradient) to `device`, dropping cached activations.
  virtual void to(Device device);
  virtual void train(bool on = true) { training_ = on; }
  void eval() { train(false); }
  bool is_training() const noexcept { return training_; }
  /// Whether backward computes dL/dx (default true). A first layer fed with data can skip it, as
  /// PyTorch does for inputs that do not require grad (it saves the input-side GEMM of the first
  /// Linear); backward then still accumulates parameter gradients but returns an undefined Tensor.
  virtual void set_needs_input_grad(bool on) { needs_input_grad_ = on; }
  bool needs_input_grad() const noexcept { return needs_input_grad_; }
  /// Mixed precision, torch.autocast's rule: with bfloat16 or float16, layers with a GEMM (Linear)
  /// multiply in that type (inputs and a rounded copy of the weights, float32 accumulation) and
  /// return it; parameters and their gradients stay float32 (the master copy the optimizer
  /// steps). Layers without one follow their input's dtype. float32 (the default) turns it off.
  /// Containers pass it to their children. DTypeError for float64.
  virtual void set_precision(DType precision);
  DType precision() const noexcept { return precision_; }
  /// torch's zero_grad(set_to_none): by default leaves every parameter's gradient undefined, its
  /// buffer kept for the next backward to overwrite (Note [released gradients] in
  /// nn/parameter.h); with false, sets every gradient to zeros (allocating it on first use).
  void zero_grad(bool set_to_none = true);
  int64_t num_parameters();
  /// torch's repr: "Linear(in_features=3, out_features=2, bias=True)".
  virtual std::string repr() const = 0;

 protected:
  bool training_ = true;
  bool needs_input_grad_ = true;
  DType precision_ = DType::Float32;
};

}  // namespace minitrain
