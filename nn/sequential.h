#pragma once
// Modules applied in order, named "0", "1", ... as torch.nn.Sequential, so an MLP's parameters
// are "0.weight", "0.bias", "2.weight", ... and its weights files load into PyTorch and back.

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/fused_mlp/fused_mlp.h"
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

  /// Which kernels run the model (Note [fused MLP] in nn/sequential.cpp), by a name of
  /// kMlpKernels: "layers" (the default: each layer its own kernels) or "fused" (the whole
  /// forward in one launch and the backward in two, kernels/fused_mlp/fused_mlp.h; forward then
  /// throws ValueError saying why where the model or input does not fit). ValueError listing
  /// the names for another.
  void set_mlp_kernel(const std::string& name);
  const std::string& mlp_kernel() const noexcept { return mlp_kernel_; }
  /// Empty when mlp kernel "fused" can run this model on `x`, else why not (one sentence).
  std::string fused_mlp_refusal(const Tensor& x) const;

  std::size_t size() const noexcept { return layers_.size(); }
  Module& operator[](std::size_t i) { return *layers_.at(i); }
  /// Hands the layers over, in order, and leaves this Sequential empty (ModelParallel splits a
  /// model into stages this way; the layers keep their training mode and input-grad settings).
  std::vector<std::unique_ptr<Module>> release_layers();

 private:
  void propagate_input_grad();
  // The model as the fused MLP's layers; false (and `why`) where it is not Linear layers each
  // followed by at most one activation layer, computing in float32.
  bool fused_layers(std::vector<FusedMlpLayer>& out, std::string& why) const;
  Tensor fused_backward(const Tensor& grad_output);

  std::vector<std::unique_ptr<Module>> layers_;
  BackwardHook backward_hook_;
  std::string mlp_kernel_ = "layers";
  std::vector<FusedMlpLayer> fused_layers_;  // of the last fused training-mode forward
  FusedMlpSaved fused_saved_;                // what it kept for backward
};

/// The names set_mlp_kernel takes, with what each runs (for --help and error messages).
struct MlpKernelInfo {
  const char* name;
  const char* what;
};
inline constexpr MlpKernelInfo kMlpKernels[] = {
    {"layers", "each layer its own kernels (a GEMM backend, bias and activation passes)"},
    {"fused", "the whole MLP in one kernel forward and two backward (float32, widths <= 128)"},
};

}  // namespace minitrain
