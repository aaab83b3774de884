#pragma once
// The training step as one CUDA graph (docs/cuda_graph.md): forward, loss, backward, clipping and
// the optimizer's update, captured once after a few eager steps and then replayed each step with
// one graph launch and one small kernel launch (the step's optimizer factors: Note [capturable
// step] in optim/optimizer.h). The batch is copied into fixed input buffers on the step's stream
// before each replay; a batch of another shape (a partial last batch) takes an eager step. A
// classifier (cross_entropy, class weights and ignore_index included) checks its labels and counts
// its top-1 rows on the device, inside the graph, into a fixed scratch that each step rewrites.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/cuda_graph.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "nn/cross_entropy_loss.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "optim/clip.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"

namespace minitrain {

struct GraphStepOptions {
  /// Eager steps before the capture: the first creates the optimizer's state and the caching
  /// allocator's blocks of every size the step asks for (a capture may not cudaMalloc).
  int warmup_steps = 2;
  double clip_grad_norm = 0.0;  ///< > 0: clip_grad_norm_deferred_ inside the graph
  /// float16's dynamic loss scaling inside the graph (docs/cuda_graph.md, "float16 loss scaling
  /// in the graph"): a scaler kept on the device whose inf flag the optimizer skips on; it
  /// outlives the GraphStep.
  GradScaler* scaler = nullptr;
  /// A classifier whose batches may count nothing (rows labelled ignore_index, a class weighted
  /// 0): such a step adds a loss of 0 and a zero gradient and the optimizer skips it on its flag
  /// (Optimizer::set_found_inf: the scaler's, or one the caller set), all decided on the device
  /// (Note [a batch that counts nothing, on the device] in kernels/loss/cross_entropy.h). Without
  /// it such a batch gives torch's 0/0: a NaN loss and gradient.
  bool nothing_counted_skips = false;
};

/// Why a step of these parts on `device` cannot be captured, as one line for the user, or "" when
/// it can: a CPU device, an optimizer without a capturable step, a loss without a
/// mean or sum reduction (reduction none keeps a gradient of the batch's shape between steps,
/// which an eager step of another shape would replace under the graph), warmup_steps < 1, a
/// scaler not kept on the device or whose flag the optimizer does not skip on,
/// nothing_counted_skips without cross_entropy or without a flag the optimizer skips on.
std::string graph_step_unsupported(const Loss& loss, const Optimizer& optimizer, Device device,
                                   const GraphStepOptions& options);

/// One training step at a time, eager until the capture and replayed after it. `model`, `loss`
/// and `optimizer` must outlive it; it turns the optimizer's capturable step on (and off again
/// when destroyed). Call step() from one thread: the batch is copied into the input buffers on
/// that thread's current stream, and the step itself runs on a stream of the GraphStep's own,
/// ordered after that copy and before the caller's later work by events (Note [the step's own
/// stream] in graph_step.cpp).
class GraphStep {
 public:
  /// ValueError naming the reason of graph_step_unsupported.
  GraphStep(Module& model, Loss& loss, Optimizer& optimizer, Device device,
            GraphStepOptions options);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;

  struct Result {
    /// The step's loss, a device scalar. After a replay it is the graph's tensor, which the next
    /// replay overwrites: read it (or clone it) before the next step().
    Tensor loss;
    PendingGradNorm grad_norm;  ///< with clipping: the sums of squares, as for the loss
    /// A classifier's step (cross_entropy): float64 [5] on the device, {top-1 rows, counted rows,
    /// the label check {0 or 1, first bad row, its label}} (DeviceTotals' counts and check, in
    /// their order; Note [cross_entropy's targets on the device]), and with nothing_counted_skips
    /// [6], the step's batches that counted (0 or 1) last. The GraphStep's own scratch, which
    /// the next step rewrites, as for the loss. Undefined for other losses.
    Tensor class_totals;
    int64_t classes = 0;  ///< a classifier's logit columns (C), to name a bad label
    /// With a scaler: its record of the step (kernels/optim/amp_math.h, float64 [4]), a fixed
    /// buffer that the next step overwrites, as for the loss.
    Tensor scaler_record;
    bool replayed = false;
  };
  /// One step on the batch (x, y on the device) at the optimizer's current learning rate (set it
  /// before). Queues the work and returns without waiting for the device.
  Result step(const Tensor& x, const Tensor& y);

  const CudaGraph* graph() const noexcept { return graph_.get(); }
  int64_t replays() const noexcept { return replays_; }
  int64_t eager_steps() const noexcept { return eager_steps_; }

 private:
  Result step_on_own_stream(const Stream& stream);
  Result eager_step(const Tensor& x, const Tensor& y);
  Result forward_backward(const Tensor& x, const Tensor& y);

  Module& model_;
  Loss& loss_;
  CrossEntropyLoss* classifier_;  // the loss when it is cross_entropy, else null
  Optimizer& optimizer_;
  Device device_;
  GraphStepOptions options_;
  Tensor x_in_, y_in_;                    // the fixed input buffers the graph reads
  Tensor class_totals_;                   // a classifier's counts and label check, every step's
  Tensor record_;                         // with a scaler: the record's fixed buffer
  std::optional<Stream> own_;             // where the steps run and the graph is captured
  std::optional<Event> forked_, joined_;  // caller's stream -> own_, own_ -> caller's stream
  Result held_;  // the last step's result, freed only once the caller's stream has moved on
  std::unique_ptr<CudaGraph> graph_;
  Result captured_;  // the graph's loss and sums of squares
  std::vector<int64_t> plan_;
  int64_t replays_ = 0, eager_steps_ = 0;
  int warm_steps_ = 0;  // eager steps on the input buffers since the last (or before the) capture
};

}  // namespace minitrain
