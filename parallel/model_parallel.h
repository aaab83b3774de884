#pragma once
// Layer-split model parallelism with GPipe micro-batching: a Sequential cut into contiguous
// stages, stage s on devices[s % devices.size()], each stage driven by its own host thread.
// forward cuts the batch into micro-batches that flow through the stages so that stage s works
// on micro-batch m while stage s+1 works on m-1; activations move between stages by device copies
// (peer copies between GPUs, or staged through host memory). backward runs the micro-batches back
// through the stages in reverse; each stage re-computes its forward for the micro-batch just
// before its backward (GPipe's re-materialisation), so a stage keeps only its micro-batch inputs.
// Gradients accumulate over micro-batches, which gives exactly the whole batch's gradient.
// On the CPU the stages are threads, so the same schedule runs, and is tested, without GPUs.

#include <memory>
#include <vector>

#include "nn/module.h"
#include "nn/sequential.h"

namespace minitrain {

class ModelParallel final : public Module {
 public:
  /// `boundaries` (optional): the first layer index of stages 1..stages-1; by default stages are
  /// balanced by parameter count. ValueError for stages < 1 or > the number of layers,
  /// micro_batches < 1, bad boundaries, or no devices.
  ModelParallel(std::unique_ptr<Sequential> model, int stages, int micro_batches,
                std::vector<Device> devices, std::vector<int> boundaries = {});
  ~ModelParallel() override;

  Tensor forward(const Tensor& x) override;             ///< output on the last stage's device
  Tensor backward(const Tensor& grad_output) override;  ///< dx on the first stage's device
  /// The wrapped model's names ("0.weight", "2.bias", ...), whatever stage holds them.
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;  ///< DeviceError: stages stay where they are
  void train(bool on = true) override;
  std::string repr() const override;  ///< the stages, their layers and devices

  int stages() const noexcept;
  int micro_batches() const noexcept;
  /// GPipe's idle share of the schedule, (S - 1) / (M + S - 1).
  double bubble_fraction() const noexcept;
  /// First layer index of each stage (stage 0 starts at 0).
  std::vector<int> stage_starts() const;
  Device stage_device(int stage) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minitrain
