// Sequential: children named "0", "1", ... in order; backward walks them in reverse, calling the
// backward hook (if any) after each child.

#include "nn/sequential.h"

#include <string>

#include "nn/activation_layer.h"
#include "nn/linear.h"

namespace minitrain {

Sequential& Sequential::add(std::unique_ptr<Module> m) {
  MT_CHECK_AS(ValueError, m != nullptr, "Sequential::add: the module is null");
  m->train(training_);
  if (precision_ != DType::Float32) m->set_precision(precision_);
  layers_.push_back(std::move(m));
  propagate_input_grad();
  return *this;
}

// Note [Linear + activation]: a Linear followed by an activation layer runs as one pass where the
// Linear can fuse (Linear::fuses_activation: the CPU's OpenBLAS path): the bias add and the
// activation on each tile of the GEMM as it is made, in the GEMM's parallel region. In backward,
// a Linear's input gradient goes through the activation layer before it the same way. Each layer
// keeps what it keeps unfused (the Linear its input, the activation layer its input, which is the
// Linear's output), the results are the same bits, and the backward hook is called for both
// layers, in the same order; what goes is two passes over memory and, with passive thread
// waiting, a thread wake-up per pass (Note [passive thread waiting] in core/thread_policy.h).
// On a GPU (Linear::fuses_activation_forward, float32/float64 without mixed precision, any GEMM
// backend but cublaslt) forward is the GEMM and one bias + activation kernel instead of a bias add
// and an activation kernel; backward pairs the other way: an activation layer with the Linear
// before it, whose bias gradient's column sums are taken in the activation backward's own pass
// (kernels/bias_activation.h), before the two GEMMs. Same bits again (docs/fused_mlp.md).
namespace {

Linear* as_linear(Module* m) { return dynamic_cast<Linear*>(m); }
ActivationLayer* as_activation(Module* m) { return dynamic_cast<ActivationLayer*>(m); }

}  // namespace

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Linear* linear = as_linear(layers_[i].get());
    ActivationLayer* act = i + 1 < layers_.size() ? as_activation(layers_[i + 1].get()) : nullptr;
    if (linear != nullptr && act != nullptr && linear->fuses_activation_forward(h)) {
      Tensor pre;
      h = linear->forward_activation(h, act->kind(), pre);
      act->keep_fused_input(pre);
      ++i;
      continue;
    }
    h = layers_[i]->forward(h);
  }
  return h;
}

Tensor Sequential::backward(const Tensor& grad_output) {
  Tensor g = grad_output;
  for (std::size_t i = layers_.size(); i-- > 0;) {
    // On a GPU: an activation layer with the Linear before it, the activation's backward and the
    // Linear's bias gradient in one pass (Linear::backward_through_activation).
    ActivationLayer* act_here = as_activation(layers_[i].get());
    Linear* linear_before = i > 0 ? as_linear(layers_[i - 1].get()) : nullptr;
    if (act_here != nullptr && linear_before != nullptr && act_here->needs_input_grad() &&
        linear_before->fuses_activation_grad(act_here->kept_input())) {
      g = linear_before->backward_through_activation(g, act_here->kind(), act_here->kept_input());
      if (backward_hook_) backward_hook_(i);
      --i;
      if (backward_hook_) backward_hook_(i);
      continue;
    }
    Linear* linear = as_linear(layers_[i].get());
    ActivationLayer* act = i > 0 ? as_activation(layers_[i - 1].get()) : nullptr;
    if (linear != nullptr && act != nullptr && act->kept_input().defined() &&
        act->needs_input_grad() == linear->needs_input_grad() &&
        linear->fuses_activation(act->kept_input())) {
      g = linear->backward_activation(g, act->kind(), act->kept_input());
      if (backward_hook_) backward_hook_(i);
      --i;
      if (backward_hook_) backward_hook_(i);
      continue;
    }
    g = layers_[i]->backward(g);
    if (backward_hook_) backward_hook_(i);
  }
  return g;  // undefined when the first layers skip dL/dx (set_needs_input_grad(false))
}

std::vector<std::unique_ptr<Module>> Sequential::release_layers() {
  std::vector<std::unique_ptr<Module>> out = std::move(layers_);
  layers_.clear();  // a moved-from vector is valid but unspecified: make it empty
  return out;
}

NamedParameters Sequential::named_parameters(const std::string& prefix) {
  NamedParameters out;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    NamedParameters child = layers_[i]->named_parameters(prefix + std::to_string(i) + ".");
    out.insert(out.end(), child.begin(), child.end());
  }
  return out;
}

void Sequential::to(Device device) {
  for (auto& layer : layers_) layer->to(device);
}

void Sequential::train(bool on) {
  training_ = on;
  for (auto& layer : layers_) layer->train(on);
}

void Sequential::set_precision(DType precision) {
  Module::set_precision(precision);
  for (auto& layer : layers_) layer->set_precision(precision);
}

void Sequential::set_needs_input_grad(bool on) {
  needs_input_grad_ = on;
  propagate_input_grad();
}

// Layer i needs dL/d(its input) when the Sequential's input needs it or when a layer before i
// has parameters (their gradients flow through layer i's input).
void Sequential::propagate_input_grad() {
  bool needed = needs_input_grad_;
  for (auto& layer : layers_) {
    layer->set_needs_input_grad(needed);
    if (!needed && layer->num_parameters() > 0) needed = true;
  }
}

std::string Sequential::repr() const {
  if (layers_.empty()) return "Sequential()";
  std::string s = "Sequential(\n";
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    // torch's _addindent: a multi-line child repr is indented by two more spaces.
    std::string child = layers_[i]->repr();
    std::string indented;
    for (char c : child) {
      indented += c;
      if (c == '\n') indented += "  ";
    }
    s += "  (" + std::to_string(i) + "): " + indented + "\n";
  }
  return s + ")";
}

}  // namespace minitrain
