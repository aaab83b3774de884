// Sequential: children named "0", "1", ... in order; backward walks them in reverse, calling the
// backward hook (if any) after each child.

#include "nn/sequential.h"

#include <string>
#include <utility>

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
std::vector<Linear*> linear_layers(const std::vector<std::unique_ptr<Module>>& layers) {
  std::vector<Linear*> out;
  for (const auto& layer : layers)
    if (Linear* linear = as_linear(layer.get())) out.push_back(linear);
  return out;
}
ActivationLayer* as_activation(Module* m) { return dynamic_cast<ActivationLayer*>(m); }

}  // namespace

// Note [fused MLP]: with set_mlp_kernel("fused") a model of Linear layers, each followed by at
// most one activation layer, all float32 and every width <= 128, runs forward as one kernel
// launch and backward as two (kernels/fused_mlp/fused_mlp.h), on a GPU or, as the CPU twin, on
// the CPU. Its bits are those of the layers one by one with the GEMM backend "naive" (GPU) or
// "reference" (CPU), not those of the default backends (cuBLAS, the warptile rung, OpenBLAS sum in
// other orders), so it is opt-in: "layers" stays the default (docs/fused_mlp.md). The Sequential
// keeps what backward needs (each layer's z and activation output); the layers themselves keep
// nothing, and the backward hook runs for every layer, last to first, after the two launches.
void Sequential::set_mlp_kernel(const std::string& name) {
  std::string names;
  for (const MlpKernelInfo& k : kMlpKernels) {
    if (name == k.name) {
      mlp_kernel_ = name;
      fused_layers_.clear();
      fused_saved_ = FusedMlpSaved();
      return;
    }
    names += (names.empty() ? "" : ", ") + std::string(k.name);
  }
  MT_THROW(ValueError, "unknown mlp kernel '", name, "'; choose one of ", names);
}

bool Sequential::fused_layers(std::vector<FusedMlpLayer>& out, std::string& why) const {
  out.clear();
  if (precision_ != DType::Float32) {
    why = std::string("the model computes under mixed precision (") + precision_name(precision_) +
          "); the fused MLP computes in float32 only";
    return false;
  }
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    Module* m = layers_[i].get();
    if (Linear* linear = as_linear(m)) {
      FusedMlpLayer layer;
      layer.weight = linear->weight().value;
      layer.bias = linear->bias().value;
      out.push_back(layer);
      continue;
    }
    ActivationLayer* act = as_activation(m);
    if (act != nullptr && !out.empty() && !out.back().has_activation) {
      out.back().has_activation = true;
      out.back().activation = act->kind();
      continue;
    }
    why = "layer " + std::to_string(i) + " is " + m->repr() +
          "; the fused MLP takes Linear layers, each followed by at most one activation (" +
          [] {
            std::string names;
            for (const std::string& n : activation_names())
              names += (names.empty() ? "" : ", ") + n;
            return names;
          }() +
          ")";
    return false;
  }
  return true;
}

std::string Sequential::fused_mlp_refusal(const Tensor& x) const {
  std::vector<FusedMlpLayer> layers;
  std::string why;
  if (!fused_layers(layers, why)) return why;
  return minitrain::fused_mlp_refusal(layers, x);
}

Tensor Sequential::forward(const Tensor& x) {
  if (mlp_kernel_ == "fused") {
    std::vector<FusedMlpLayer> layers;
    std::string why;
    if (fused_layers(layers, why)) why = minitrain::fused_mlp_refusal(layers, x);
    MT_CHECK_AS(ValueError, why.empty(), "mlp kernel 'fused' cannot run this model: ", why,
                "; use --mlp-kernel layers");
    FusedMlpSaved saved;
    Tensor y = fused_mlp_forward(layers, x, saved);
    fused_layers_.clear();
    fused_saved_ = FusedMlpSaved();
    if (training_) {  // eval mode keeps nothing (and forgets an older forward), as Linear does
      fused_layers_ = std::move(layers);
      fused_saved_ = std::move(saved);
    }
    return y;
  }
  // Note [the weight casts] in nn/linear.cpp: mixed precision's 16-bit weights, one launch.
  const Linear::RoundedWeights weights16(linear_layers(layers_));
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

Tensor Sequential::fused_backward(const Tensor& grad_output) {
  MT_CHECK(!fused_layers_.empty(),
           "Sequential: backward called without a preceding training-mode forward (mlp kernel "
           "'fused'; call train() before forward; eval mode keeps nothing for backward)");
  std::vector<FusedMlpGrads> grads;
  for (auto& layer : layers_) {
    Linear* linear = as_linear(layer.get());
    if (linear == nullptr) continue;
    FusedMlpGrads g;
    g.weight = grad_to_write(linear->weight(), g.overwrite_weight);
    if (linear->bias().value.defined()) g.bias = grad_to_write(linear->bias(), g.overwrite_bias);
    grads.push_back(g);
  }
  const bool input_grad = !layers_.empty() && layers_.front()->needs_input_grad();
  Tensor dx = fused_mlp_backward(fused_layers_, fused_saved_, grad_output, grads, input_grad);
  if (backward_hook_)
    for (std::size_t i = layers_.size(); i-- > 0;) backward_hook_(i);
  return dx;
}

Tensor Sequential::backward(const Tensor& grad_output) {
  if (mlp_kernel_ == "fused") return fused_backward(grad_output);
  // Note [the gradient casts] in nn/linear.cpp: mixed precision's gradient casts in one launch at
  // the end, or layer by layer where a hook reads each layer's gradients when it returns.
  Linear::RoundedGradients grads16(backward_hook_ ? std::vector<Linear*>{}
                                                  : linear_layers(layers_));
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
  grads16.flush();
  return g;  // undefined when the first layers skip dL/dx (set_needs_input_grad(false))
}

std::vector<std::unique_ptr<Module>> Sequential::release_layers() {
  std::vector<std::unique_ptr<Module>> out = std::move(layers_);
  layers_.clear();  // a moved-from vector is valid but unspecified: make it empty
  fused_layers_.clear();
  fused_saved_ = FusedMlpSaved();
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
  fused_layers_.clear();
  fused_saved_ = FusedMlpSaved();
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
