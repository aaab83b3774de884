#pragma once
// The training loop, for the `minitrain train` command and for programs that use the library:
//
//   auto model = make_mlp({8, 64, 1}, Activation::ReLU, gen);
//   auto opt = make_optimizer({"adam", 1e-3}, model->named_parameters());
//   DataLoader loader(dataset, {/*batch_size=*/64});
//   TrainerOptions o;  o.total_steps = 1000;
//   Trainer(*model, *opt, loader, o).run();
//
// One step: set the scheduled lr, zero the gradients, then for each of grad_accum batches
// forward, loss (options.loss, MSE by default), backward (the loss gradient scaled by 1/batches,
// as dividing the loss in torch), then clip and update. The loss reported for a step is the mean
// of its batches' losses, computed before the update. Steps count from 1. On a GPU the losses
// stay on the device (train/device_totals.h) until a value is needed: a log line, the progress
// line, an evaluation, a checkpoint, the last step (issue 35); the check that the loss is finite
// happens then, so the steps queued after a non-finite one have run (their weights are not
// saved: a checkpoint reads first). On the CPU, and with reduce_loss (ddp), each step reads its
// loss before its update, which a non-finite loss skips. A model set to a 16-bit precision
// (Module::set_precision) returns 16-bit predictions: the loss is computed in float32 on them
// widened, and its gradient rounded back (torch.autocast's rule for losses); with
// options.loss_scaling (float16) the loss gradient is multiplied by the scale, the gradients are
// unscaled and checked after backward, and a step with an inf/NaN gradient is skipped (logged, not
// fatal: the scale backs off). With options.validate, held-out evaluations follow the steps they
// are due after (every eval_every steps, each epoch's end, the last step), and decide the best step
// and early stopping.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/buffer_slot.h"
#include "core/error.h"
#include "core/generator.h"
#include "core/gpu_monitor.h"
#include "data/data_loader.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/clip.h"
#include "train/checkpoint.h"
#include "train/device_totals.h"
#include "train/graph_step.h"
#include "train/metrics_log.h"
#include "train/progress.h"
#include "train/replica_sync.h"
#include "train/step_stats.h"

namespace minitrain {

/// The loss (or, at a checkpoint, a weight) stopped being finite: the run stops there.
class NonFiniteError : public Error {
 public:
  using Error::Error;
};

struct TrainerOptions {
  int64_t total_steps = 0;  ///< the run ends after this step (>= 1)
  int64_t grad_accum = 1;   ///< batches per optimizer step
  /// The data ends after this many batches (an --epochs run whose last step has fewer than
  /// grad_accum batches left); 0: total_steps * grad_accum.
  int64_t total_batches = 0;
  double clip_grad_norm = 0.0;                 ///< 0: no clipping
  std::shared_ptr<const LRSchedule> schedule;  ///< null: the optimizer's lr throughout
  std::string checkpoint_dir;                  ///< empty: no checkpoints
  int64_t checkpoint_every = 0;  ///< steps; the run's last step is always checkpointed
  std::map<std::string, std::string> checkpoint_metadata;  ///< extra, e.g. {"config": json}
  Generator* generator = nullptr;  ///< its state is saved in and restored from checkpoints
  MetricsLog* log = nullptr;
  Progress* progress = nullptr;
  /// Reads the device's utilisation and memory into each step's stats (StepStats::gpu); null or
  /// a monitor that cannot read: none.
  GpuMonitor* gpu_monitor = nullptr;
  std::function<void(const StepStats&)> on_step;  ///< after each step (and its log line)
  /// The loss minimised; null: MSELoss with reduction mean. A loss with class-index targets makes
  /// a classifier: steps then report the accuracy of their batches.
  std::shared_ptr<Loss> loss;
  /// No training row is labelled ignore_index (run_training knows the labels): every batch then
  /// has a row to count (with no class weighted 0), so a classifier's step on a GPU need not
  /// count its batches nor skip on a flag (issue 35; otherwise the device does both).
  bool every_row_counts = false;
  /// A classifier's step on one GPU checks its labels, forms its mean's divisor and counts its
  /// rows on the host, reading the labels (and logits) every step: the path before issue 35,
  /// kept to compare the device path against. false (the default): all of it on the device, a
  /// batch with nothing to count included (Note [a batch that counts nothing, on the device]).
  bool labels_on_host = false;
  /// Dynamic loss scaling (float16 training); none: no scaling. Its state is kept in checkpoints.
  std::optional<GradScalerOptions> loss_scaling;
  /// Each step as one CUDA graph after two eager ones (train/graph_step.h, docs/cuda_graph.md):
  /// the same bits as eager steps. Trainer's constructor refuses it where
  /// Trainer::graph_unsupported names a reason; a model on several devices (mp, dp) must not ask.
  bool cuda_graph = false;

  // ---- held-out evaluation (train/validation.h) ----
  /// Evaluates the model on held-out data; null: no evaluations. Called on every rank alike.
  std::function<ValMetrics()> validate;
  int64_t eval_every = 0;  ///< steps between evaluations; 0: epoch ends and the last step only
  /// Stop after this many evaluations in a row without a lower val_loss (checkpointing as at the
  /// end); 0: never.
  int64_t early_stop = 0;
  /// After an evaluation with a lower val_loss than any before (--save-best writes the weights).
  std::function<void(int64_t step, const ValMetrics&)> on_best;

  /// Nonzero (a signal number, see StopOnSignals) asks run() to stop after the step in progress:
  /// it checkpoints (with checkpoint_dir) and returns early. Null: never.
  const std::atomic<int>* stop_requested = nullptr;

  /// What differs between one process and several ranks (ddp, local SGD, dp's replicas): see
  /// train/replica_sync.h. Null: one process. It outlives the trainer.
  ReplicaSync* replica_sync = nullptr;
};

struct TrainSummary {
  int64_t first_step = 0, last_step = 0;  ///< the steps this run() took; first > last: none
  double first_loss = std::numeric_limits<double>::quiet_NaN();
  double last_loss = std::numeric_limits<double>::quiet_NaN();
  /// The mean of the step losses of the last epoch this run() trained in (complete or not): the
  /// training loss to report, where last_loss is one step's, often a small last batch's.
  double epoch_loss = std::numeric_limits<double>::quiet_NaN();
  int64_t epoch = 0;                                                 ///< that epoch, from 1
  double epoch_accuracy = std::numeric_limits<double>::quiet_NaN();  ///< classifiers: its mean
  std::optional<ValMetrics> last_val;  ///< the last held-out evaluation, if any
  std::optional<ValMetrics>
      best_val;  ///< the one with the lowest val_loss (the run's, resumed too)
  int64_t best_step = 0;
  bool early_stopped = false;  ///< options.early_stop ended the run
  /// float16 loss scaling: the scale after the last step (NaN without scaling) and the steps the
  /// whole run skipped for inf/NaN gradients (a resumed run's too).
  double loss_scale = std::numeric_limits<double>::quiet_NaN();
  int64_t skipped_steps = 0;
  /// Steps of this run() with no row to count (StepStats::nothing_counted): no update was made.
  int64_t nothing_counted_steps = 0;
  double seconds = 0.0;
  int64_t samples = 0;
  std::string last_checkpoint;  ///< the checkpoint written last, if any
  /// The run stopped before total_steps because a stop was requested (options.stop_requested, on
  /// this rank or, under ddp, another); stop_signal is this rank's signal, 0 if it got none.
  bool stopped_early = false;
  int stop_signal = 0;
};

/// Steps for `epochs` passes over the data: ceil(epochs * batches_per_epoch / grad_accum).
int64_t steps_for_epochs(int64_t epochs, int64_t batches_per_epoch, int64_t grad_accum);

class Trainer {
 public:
  /// The model, optimizer and loader must outlive the trainer; the model is on the loader's device.
  Trainer(Module& model, Optimizer& optimizer, DataLoader& loader, TrainerOptions options);

  /// Restores model, optimizer, RNG and data position from a checkpoint; run() then continues
  /// from the step after it, with the batches an uninterrupted run would have seen. A checkpoint
  /// of another layout (ranks x batch size) continues at the same global sample when that sample
  /// is at a batch boundary of this layout; otherwise a ValueError names both layouts.
  void resume(const std::string& checkpoint_path);

  /// Trains from the current step to options.total_steps. Throws NonFiniteError when the loss
  /// (or a weight at a checkpoint) is not finite, after logging the step; the last checkpoint
  /// written is then the last good one.
  TrainSummary run();

  /// Writes a checkpoint of the current state now (atomically); NonFiniteError when a weight is
  /// not finite, without writing. Under ddp every rank must call it
  /// (ReplicaSync::after_checkpoint).
  void save_checkpoint(const std::string& path);

  /// Where steps are reported from the next run() on (null: nowhere). Lets a caller open the log
  /// only once resume() has said which step the run continues after.
  void set_log(MetricsLog* log) noexcept { options_.log = log; }
  void set_progress(Progress* progress) noexcept { options_.progress = progress; }

  int64_t step() const noexcept { return step_; }  ///< steps completed
  int64_t batches_seen() const noexcept { return batches_seen_; }
  int64_t samples_seen() const noexcept { return samples_seen_; }  ///< over all ranks
  const TrainerOptions& options() const noexcept { return options_; }

  /// Why `options` cannot run each step as a CUDA graph with `optimizer` on `device` (one line),
  /// or "": gradient accumulation, several ranks, and graph_step_unsupported's reasons (a CPU
  /// device, an optimizer without a capturable step, a loss scaler not kept on the device), and a
  /// classifier asked to read its labels on the host (labels_on_host).
  static std::string graph_unsupported(const TrainerOptions& options, const Optimizer& optimizer,
                                       Device device);
  /// The steps replayed as a CUDA graph so far (0 without cuda_graph).
  int64_t graph_replays() const noexcept;

 private:
  // One step, as named blocks (train_step calls them in this order).
  StepStats train_step();
  StepStats begin_step(bool zero_grad = true);  // lr, zeroed gradients
  Batch next_batch(StepStats& s, int64_t b);    // data
  void forward_loss_backward(const Batch& batch, int64_t b, int64_t batches,
                             std::vector<double>& counts, StepStats& s);
  void end_batches(StepStats& s, int64_t batches_before);  // epoch end, stop request
  // Shared by train_step and graph_train_step: the step's device totals slot (opened at batch 0),
  // a batch's rows counted, and the end of an update (ddp/local-SGD hook, step_ advanced).
  void open_totals(const Tensor& on, int64_t b, int64_t batches);
  void count_batch(const Batch& batch, StepStats& s);
  void end_update(const StepStats& s);
  bool read_in_step() const;        // whether the step reads its loss before its update
  bool counts_on_device() const;    // a classifier's counts and label check stay on the device
  bool every_batch_counts() const;  // no batch can be one with nothing to count (issue 30)
  void read_loss_now(StepStats& s, std::vector<double>& counts);
  // classifiers: accuracy, and the loss over the batches with a row to count (issue 30)
  void count_rows(std::vector<double>& counts, int64_t batches, bool read, StepStats& s);
  std::optional<PendingGradNorm> clip_gradients();
  void record_grad_norm(const PendingGradNorm& norm, StepStats& s);
  void record_step_time(StepStats& s, std::chrono::steady_clock::time_point start,
                        double cpu_start) const;

  // Reading what the steps left on the device, and reporting them (log, progress, evaluation,
  // checkpoint): values_due says whether the newest step needs its values now.
  struct RunMeans {
    double loss_sum = 0, accuracy_sum = 0;
    int64_t steps = 0;
  };
  bool values_due(const StepStats& s) const;
  void read_unreported();
  // true when the run ends after this step (early stop, stop request)
  bool report_step(StepStats& s, bool newest, TrainSummary& summary, RunMeans& means);
  int64_t batches_for_step(int64_t step) const;
  CheckpointPosition position() const;
  int64_t global_batch() const noexcept {
    return loader_.options().batch_size * sync_->world_size();
  }
  // The batch index of this layout where a checkpoint of another layout stands; ValueError if none.
  int64_t map_batch_index(const std::string& path,
                          const std::map<std::string, std::string>& meta) const;

  // Whether a held-out evaluation is due after step `s` (alike on every rank).
  bool evaluation_due(const StepStats& s) const;
  // Whether run() checkpoints after step `step` (given the stop decision and an early stop).
  bool checkpoint_due(int64_t step, bool stop) const;
  // Runs it into s.val, updates the best and the patience; true when early stopping ends the run.
  bool evaluate(StepStats& s);

  // float16: unscales and checks this step's gradients; true when the step may be taken.
  bool unscale_gradients(StepStats& s);

  bool stop_agreed_ = false;  // the last step's stop decision, alike on every rank
  std::optional<GradScaler> scaler_;
  int64_t skipped_steps_ = 0;  // steps skipped for inf/NaN gradients, over the whole run
  double scale_read_ = 0.0;    // the scaler kept on the device: its scale as last read
  std::shared_ptr<Loss> loss_;
  // A classifier on one GPU whose batches may count nothing (issue 35): each batch's divisor is
  // counted on the device and a step that counted nothing is skipped on the optimizer's flag,
  // skip_flag_ (or, under float16 scaling, the scaler's, which its update raises).
  bool nothing_counted_skips_ = false;
  Tensor skip_flag_;
  // The steps' losses (and clipping norms) on the device, and the steps not reported yet.
  std::optional<DeviceTotals> totals_;
  std::vector<StepStats> unreported_;
  // cuda_graph: the step's forward, loss, backward, clipping and update, captured and replayed
  std::unique_ptr<GraphStep> graph_;
  StepStats graph_train_step();
  // The held-out record, kept in checkpoints so that a resumed run stops and saves as one that
  // was not interrupted.
  std::optional<ValMetrics> best_val_;
  int64_t best_step_ = 0;
  int64_t evals_since_best_ = 0;
  bool early_stopped_ = false;
  Module& model_;
  Optimizer& optimizer_;
  DataLoader& loader_;
  TrainerOptions options_;
  ReplicaSync* sync_;  // options_.replica_sync, or one process's
  Device device_;
  int64_t step_ = 0;
  int64_t batches_seen_ = 0;
  // Mixed precision: the 16-bit prediction widened for the loss and the loss gradient rounded
  // back, rewritten each step (Note [buffers that live across steps], core/buffer_slot.h).
  BufferSlot widened_pred_, rounded_grad_;
  ClipWorkspace clip_workspace_;  // --clip-grad-norm's sum of squares and partials, the same way
  int64_t logit_columns_ = 0;     // a classifier's C, for a label check read from the device
  int64_t samples_seen_ = 0;      // rows consumed by all ranks together
  std::string last_checkpoint_;
};

/// Throws NonFiniteError naming the first parameter with a NaN or infinite value.
void check_parameters_finite(Module& model, const std::string& when);

}  // namespace minitrain
