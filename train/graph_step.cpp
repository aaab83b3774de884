// The training step as one CUDA graph: eager warm-up steps on the fixed input buffers, one
// capture, then a replay per step (docs/cuda_graph.md).

#include "train/graph_step.h"

#include <utility>

#include "core/error.h"
#include "core/stream.h"
#include "kernels/fill.h"
#include "kernels/loss/cross_entropy.h"
#include "kernels/cast.h"
#include "kernels/optim/amp_math.h"

namespace minitrain {

std::string graph_step_unsupported(const Loss& loss, const Optimizer& optimizer, Device device,
                                   const GraphStepOptions& options) {
  if (!device.is_cuda()) return "a CUDA graph needs a CUDA device, not " + device.str();
  if (!optimizer.supports_capturable())
    return "the optimizer " + optimizer.name() +
           " has no capturable step (a replay would repeat the captured learning rate)";
  if (loss.target_kind() == TargetKind::ClassIndices &&
      dynamic_cast<const CrossEntropyLoss*>(&loss) == nullptr)
    return "the loss " + loss.name() + " checks its class labels on the host at every step";
  if (options.nothing_counted_skips && dynamic_cast<const CrossEntropyLoss*>(&loss) == nullptr)
    return "the loss " + loss.name() +
           " cannot count its batches on the device (cross_entropy can)";
  if (options.nothing_counted_skips && !optimizer.found_inf().defined())
    return "a step that counts nothing is skipped on the optimizer's flag, and the optimizer has "
           "none (Optimizer::set_found_inf)";
  if (loss.options().reduction == Reduction::None)
    return "the loss reduction 'none' keeps a gradient of the batch's shape between steps";
  if (options.scaler != nullptr && !options.scaler->kept_on_device())
    return "float16 loss scaling decides on the host whether to step (its scaler is kept on the "
           "device only for one process with every parameter on one GPU)";
  if (options.scaler != nullptr &&
      (!optimizer.found_inf().defined() ||
       optimizer.found_inf().raw_data() != options.scaler->found_inf().raw_data()))
    return "the optimizer does not skip on the loss scaler's inf flag (Optimizer::set_found_inf)";
  if (options.warmup_steps < 1)
    return "warmup_steps is " + std::to_string(options.warmup_steps) +
           "; at least one eager step must fill the allocator's cache before the capture";
  return "";
}

GraphStep::GraphStep(Module& model, Loss& loss, Optimizer& optimizer, Device device,
                     GraphStepOptions options)
    : model_(model),
      loss_(loss),
      classifier_(dynamic_cast<CrossEntropyLoss*>(&loss)),
      optimizer_(optimizer),
      device_(device),
      options_(options) {
  const std::string why = graph_step_unsupported(loss, optimizer, device, options);
  MT_CHECK_AS(ValueError, why.empty(), "GraphStep: the step cannot be captured: ", why);
  optimizer_.set_capturable(true);
  if (options_.scaler != nullptr)
    record_ = Tensor::zeros(Shape{kAmpRecordSize}, DType::Float64, device_);
}

GraphStep::~GraphStep() {
  graph_.reset();  // its memory back to the cache before the optimizer goes back to by-value
  optimizer_.set_capturable(false);
}

GraphStep::Result GraphStep::forward_backward(const Tensor& x, const Tensor& y) {
  Result r;
  model_.train();
  model_.zero_grad();
  const Tensor out = model_.forward(x);
  // A 16-bit prediction (mixed precision) is widened: the loss is float32 (torch.autocast).
  const Tensor pred = is_half(out.dtype()) ? cast(out, DType::Float32) : out;
  Tensor grad;
  if (classifier_ == nullptr) {
    r.loss = loss_.forward_backward(pred, y, grad);
  } else {
    // Note [a classifier's step in the graph]: cross_entropy checks the labels on the device
    // (Note [cross_entropy's targets on the device]) and the top-1 rows are counted there, into
    // class_totals_, a scratch of fixed address that every step zeroes and writes: a replay
    // writes where the capture did, and the caller adds it to its totals behind the step. The
    // loss reads nothing on the host, so the capture holds.
    // With nothing_counted_skips the scratch's last field counts the batch when it has a row to
    // count (Note [a batch that counts nothing, on the device]): the loss is then 0 and the
    // gradient zero, and the optimizer skips on its flag (set here without a scaler; with one,
    // its update sets it below).
    zero_(class_totals_);
    classifier_->set_target_check(class_totals_.narrow(2, 3));
    if (options_.nothing_counted_skips)
      classifier_->set_batch_count(class_totals_.narrow(5, 1),
                                   options_.scaler != nullptr ? Tensor() : optimizer_.found_inf());
    try {
      r.loss = loss_.forward_backward(pred, y, grad);
    } catch (...) {
      classifier_->set_target_check(Tensor());
      classifier_->set_batch_count(Tensor());
      throw;
    }
    classifier_->set_target_check(Tensor());
    classifier_->set_batch_count(Tensor());
    // before backward: a module may reuse its output's memory (the same stream reads it first)
    Tensor counts = class_totals_.narrow(0, 2);
    cross_entropy_count_correct(counts, pred, y, loss_.options().ignore_index);
    r.class_totals = class_totals_;
    r.classes = pred.size(1);
  }
  GradScaler* scaler = options_.scaler;
  if (scaler != nullptr) scaler->scale_loss_gradient(grad, 1.0);  // times the scale on the device
  model_.backward(out.dtype() == grad.dtype() ? grad : cast(grad, out.dtype()));
  if (scaler != nullptr) {
    // The flag and the scale's update stay on the device; the optimizer skips on the flag.
    scaler->unscale_queued(model_.named_parameters());
    const Tensor batches = options_.nothing_counted_skips ? class_totals_.narrow(5, 1) : Tensor();
    scaler->update_queued(&record_, batches.defined() ? &batches : nullptr);
    r.scaler_record = record_;
  }
  if (options_.clip_grad_norm > 0.0)
    r.grad_norm = clip_grad_norm_deferred_(model_.named_parameters(), options_.clip_grad_norm);
  return r;
}

GraphStep::Result GraphStep::eager_step(const Tensor& x, const Tensor& y) {
  Result r = forward_backward(x, y);
  optimizer_.step();  // capturable: prepare_step and queue_step
  ++eager_steps_;
  return r;
}

// Note [the step's own stream]: work queued on a stream while it is being captured becomes part
// of the graph, whichever thread queues it. A data loader's worker queues its next batches'
// copies on the caller's stream (Note [data loader streams]), so a capture there would take one
// of them into the graph, and every replay would repeat it. The steps therefore run, and are
// captured, on a stream of the GraphStep's own: it waits for the caller's stream (the batch's
// copy into the input buffers) and the caller's stream waits for it (the caller reads the loss).
// The last step's result is kept until the next step has forked, so that a block of it is not
// given back to the allocator while the caller's stream may still read it.
GraphStep::Result GraphStep::step(const Tensor& x, const Tensor& y) {
  const Stream& stream = current_stream(device_);
  MT_CHECK_AS(DeviceError, x.device() == device_ && y.device() == device_,
              "GraphStep::step: the batch is on ", x.device(), " and ", y.device(),
              " but the step runs on ", device_);
  if (!own_) {
    own_.emplace(Stream::create(device_));
    forked_.emplace(Event::create(device_));
    joined_.emplace(Event::create(device_));
  }
  // The input buffers take the first batch's shape; the warm-up steps read them too, so that the
  // capture asks the caching allocator for no more blocks than a warm-up step did.
  if (!x_in_.defined()) {
    x_in_ = Tensor::empty(x.shape(), x.dtype(), device_);
    y_in_ = Tensor::empty(y.shape(), y.dtype(), device_);
    if (classifier_ != nullptr)
      class_totals_ =
          Tensor::zeros({options_.nothing_counted_skips ? 6 : 5}, DType::Float64, device_);
  }
  const bool fits = x.shape() == x_in_.shape() && y.shape() == y_in_.shape() &&
                    x.dtype() == x_in_.dtype() && y.dtype() == y_in_.dtype();
  if (fits) {
    copy_bytes_async(x_in_.raw_data(), device_, x.raw_data(), device_, x.nbytes(), stream);
    copy_bytes_async(y_in_.raw_data(), device_, y.raw_data(), device_, y.nbytes(), stream);
  }
  forked_->record(stream);
  own_->wait_for(*forked_);
  held_ = Result{};
  Result r;
  {
    StreamGuard on_own(*own_);
    r = fits ? step_on_own_stream(*own_)
             : eager_step(x, y);  // a partial last batch: the graph's shapes are fixed
  }
  joined_->record(*own_);
  stream.wait_for(*joined_);
  held_ = r;
  return r;
}

// A step on the input buffers: a warm-up step, the capture, or a replay, on `stream` (own_).
GraphStep::Result GraphStep::step_on_own_stream(const Stream& stream) {
  if (!graph_ && warm_steps_ < options_.warmup_steps) {
    ++warm_steps_;
    return eager_step(x_in_, y_in_);
  }

  optimizer_.prepare_step();  // this step's factors into device memory: one small launch
  if (graph_ && optimizer_.step_plan() != plan_) {
    // Another set of parameters steps, or the optimizer's state was replaced: the graph would
    // write the old tensors. Drop it, take this step eagerly, and capture again later.
    graph_.reset();
    warm_steps_ = 1;
    Result r = forward_backward(x_in_, y_in_);
    optimizer_.queue_step();
    ++eager_steps_;
    return r;
  }
  if (!graph_) {
    plan_ = optimizer_.step_plan();
    // Thread-local: a data loader's worker may allocate on its own thread during the capture.
    graph_ = std::make_unique<CudaGraph>(CudaGraph::capture(
        stream,
        [&] {
          captured_ = forward_backward(x_in_, y_in_);
          optimizer_.queue_step();
        },
        CaptureMode::ThreadLocal));
  }
  graph_->replay(stream);
  ++replays_;
  Result r = captured_;
  r.replayed = true;
  return r;
}

}  // namespace minitrain
