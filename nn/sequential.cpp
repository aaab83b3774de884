// Sequential: children named "0", "1", ... in order; backward walks them in reverse, calling the
// backward hook (if any) after each child.

#include "nn/sequential.h"

#include <string>

namespace minitrain {

Sequential& Sequential::add(std::unique_ptr<Module> m) {
  MT_CHECK_AS(ValueError, m != nullptr, "Sequential::add: the module is null");
  m->train(training_);
  if (precision_ != DType::Float32) m->set_precision(precision_);
  layers_.push_back(std::move(m));
  propagate_input_grad();
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& layer : layers_) h = layer->forward(h);
  return h;
}

Tensor Sequential::backward(const Tensor& grad_output) {
  Tensor g = grad_output;
  for (std::size_t i = layers_.size(); i-- > 0;) {
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
