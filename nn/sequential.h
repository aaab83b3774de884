#pragma once
// Modules applied in order, named "0", "1", ... as torch.nn.Sequential, so an MLP's parameters
// are "0.weight", "0.bias", "2.weight", ... and its weights files load into PyTorch and back.

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "nn/module.h"

namespace minitrain {

class Sequential final : public Module {
 public:
  /// Called after child `index`'s backward has returned: that child's parameter gradients are
  /// final for this backward (on a GPU: enqueued on the caller's current stream), while the
  /// children before it are still to run. DistributedDataParallel starts a gradient bucket's
  /// all-reduce from here, overlapping communication with the rest of backward (torch's
  /// autograd hooks play this part).
  using BackwardHook = std::function<void(std::size_t index)>;

  Sequential() = default;
  Sequential& add(std::unique_ptr<Module> m);

  Tensor forward(const Tensor& x) override;
  Tensor backward(const Tensor& grad_output) override;  ///< children in reverse order
  /// Replaces the backward hook (an empty function removes it). An exception thrown by the hook
  /// ends backward and propagates to its caller.
  void set_backward_hook(BackwardHook hook) { backward_hook_ = std::move(hook); }
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;
  void train(bool on = true) override;
  /// false: the first layer skips dL/dx, and so does every layer up to the first with parameters.
  void set_needs_input_grad(bool on) override;
  void set_precision(DType precision) override;  ///< every child's too
  std::string repr() const override;             ///< torch's multi-line repr

  std::size_t size() const noexcept { return layers_.size(); }
  Module& operator[](std::size_t i) { return *layers_.at(i); }
  /// Hands the layers over, in order, and leaves this Sequential empty (ModelParallel splits a
  /// model into stages this way; the layers keep their training mode and input-grad settings).
  std::vector<std::unique_ptr<Module>> release_layers();

 private:
  void propagate_input_grad();

  std::vector<std::unique_ptr<Module>> layers_;
  BackwardHook backward_hook_;
};

}  // namespace minitrain
