// The training loop. Reads top to bottom: run() calls train_step() until the last step, logging
// and checkpointing after each; train_step() is forward, loss, backward, clip, update.

#include "train/trainer.h"

#include <chrono>
#include <cmath>

#include "core/allocator.h"
#include "core/stream.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"
#include "nn/mse_loss.h"
#include "optim/clip.h"

namespace minitrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int64_t steps_for_epochs(int64_t epochs, int64_t batches_per_epoch, int64_t grad_accum) {
  MT_CHECK_AS(ValueError, epochs >= 1 && batches_per_epoch >= 1 && grad_accum >= 1,
              "steps_for_epochs: epochs ", epochs, ", batches per epoch ", batches_per_epoch,
              " and grad_accum ", grad_accum, " must each be >= 1");
  return (epochs * batches_per_epoch + grad_accum - 1) / grad_accum;
}

void check_parameters_finite(Module& model, const std::string& when) {
  for (const auto& [name, p] : model.named_parameters()) {
    const double m = max_abs(p->value).item();
    if (!std::isfinite(m))
      MT_THROW(NonFiniteError, when, ": parameter '", name, "' holds ", std::isnan(m) ? "NaN" : "infinite",
               " values; the learning rate is probably too high (try a lower --lr or --clip-grad-norm)");
  }
}

Trainer::Trainer(Module& model, Optimizer& optimizer, DataLoader& loader, TrainerOptions options)
    : model_(model), optimizer_(optimizer), loader_(loader), options_(std::move(options)),
      device_(loader.options().device) {
  MT_CHECK_AS(ValueError, options_.total_steps >= 1, "Trainer: total_steps must be >= 1, got ",
              options_.total_steps);
  MT_CHECK_AS(ValueError, options_.grad_accum >= 1, "Trainer: grad_accum must be >= 1, got ",
              options_.grad_accum);
  MT_CHECK_AS(ValueError, options_.checkpoint_every >= 0, "Trainer: checkpoint_every must be >= 0, got ",
              options_.checkpoint_every);
  if (options_.total_batches == 0) options_.total_batches = options_.total_steps * options_.grad_accum;
  MT_CHECK_AS(ValueError, options_.total_batches > (options_.total_steps - 1) * options_.grad_accum,
              "Trainer: ", options_.total_batches, " batches leave nothing for step ", options_.total_steps,
              " (grad_accum ", options_.grad_accum, ")");
}

int64_t Trainer::batches_for_step(int64_t step) const {
  return std::min(options_.grad_accum, options_.total_batches - (step - 1) * options_.grad_accum);
}

CheckpointPosition Trainer::position() const {
  CheckpointPosition p;
  p.step = step_;
  p.batches_seen = batches_seen_;
  p.epoch = batches_seen_ / loader_.batches_per_epoch();
  p.batch_index = batches_seen_ % loader_.batches_per_epoch();
  if (options_.generator != nullptr) {
    p.rng_seed = options_.generator->seed();
    p.rng_offset = options_.generator->offset();
  }
  return p;
}

void Trainer::save_checkpoint(const std::string& path) {
  check_parameters_finite(model_, "step " + std::to_string(step_));
  std::map<std::string, std::string> meta = options_.checkpoint_metadata;
  meta["batches_per_epoch"] = std::to_string(loader_.batches_per_epoch());
  meta["grad_accum"] = std::to_string(options_.grad_accum);
  minitrain::save_checkpoint(path, model_, optimizer_, position(), meta);
  last_checkpoint_ = path;
}

void Trainer::resume(const std::string& path) {
  const auto meta = read_checkpoint_metadata(path);
  for (const auto& [key, want] : {std::pair<const char*, int64_t>{"batches_per_epoch", loader_.batches_per_epoch()},
                                  {"grad_accum", options_.grad_accum}}) {
    const auto it = meta.find(key);
    if (it != meta.end() && it->second != std::to_string(want))
      MT_THROW(ValueError, "cannot resume from '", path, "': it was written with ", key, " ", it->second,
               ", this run has ", want, " (resume with the settings of the original run)");
  }
  const CheckpointPosition p = load_checkpoint(path, model_, optimizer_);
  if (p.step > options_.total_steps)
    MT_THROW(ValueError, "cannot resume from '", path, "': it is at step ", p.step, ", past this run's last step ",
             options_.total_steps, " (give more --steps or --epochs)");
  step_ = p.step;
  batches_seen_ = p.batches_seen;
  if (options_.generator != nullptr) options_.generator->set_state(p.rng_seed, p.rng_offset);
  loader_.seek(batches_seen_ / loader_.batches_per_epoch(), batches_seen_ % loader_.batches_per_epoch());
  last_checkpoint_ = path;
}

StepStats Trainer::train_step() {
  const auto start = Clock::now();
  StepStats s;
  s.step = step_ + 1;
  s.total_steps = options_.total_steps;
  s.lr = options_.schedule ? options_.schedule->lr_at(s.step) : optimizer_.lr();
  optimizer_.set_lr(s.lr);
  model_.train();
  model_.zero_grad();

  MSELoss loss_fn;
  const int64_t batches = batches_for_step(s.step);
  double loss_sum = 0.0;
  for (int64_t b = 0; b < batches; ++b) {
    Batch batch = loader_.next();
    if (b == 0) s.epoch = batch.epoch + 1;
    const Tensor pred = model_.forward(batch.x);
    const Tensor loss = loss_fn.forward(pred, batch.y);
    Tensor grad = loss_fn.backward();
    if (batches > 1) scale(grad, grad, 1.0 / static_cast<double>(batches));
    model_.backward(grad);
    loss_sum += loss.item();  // waits for the device: the step's loss is reported per step anyway
    s.samples += batch.x.size(0);
    ++batches_seen_;
  }
  s.loss = loss_sum / static_cast<double>(batches);
  s.device = device_.str();

  if (std::isfinite(s.loss)) {
    if (options_.clip_grad_norm > 0) s.grad_norm = clip_grad_norm_(model_.named_parameters(), options_.clip_grad_norm);
    optimizer_.step();
    synchronize(device_);
    step_ = s.step;
  }
  s.step_ms = seconds_since(start) * 1e3;
  s.samples_per_s = s.step_ms > 0 ? static_cast<double>(s.samples) / (s.step_ms * 1e-3) : 0.0;
  const MemoryStats mem = memory_stats(device_);
  s.memory_in_use = mem.in_use;
  s.memory_peak = mem.peak;
  return s;
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  summary.first_step = step_ + 1;
  summary.last_step = step_;
  const auto start = Clock::now();
  try {
    while (step_ < options_.total_steps) {
      const StepStats s = train_step();
      if (options_.log != nullptr) options_.log->write(s);
      if (!std::isfinite(s.loss)) {
        std::string kept = last_checkpoint_.empty()
                                ? std::string("no checkpoint was written")
                                : "the last good checkpoint is '" + last_checkpoint_ + "'";
        MT_THROW(NonFiniteError, "step ", s.step, ": the loss is ", s.loss,
                 "; stopping (", kept, "). The learning rate is probably too high: try a lower --lr (now ",
                 s.lr, ") or --clip-grad-norm");
      }
      if (options_.progress != nullptr) options_.progress->update(s);
      if (summary.samples == 0) summary.first_loss = s.loss;
      summary.last_loss = s.loss;
      summary.last_step = s.step;
      summary.samples += s.samples;
      if (options_.on_step) options_.on_step(s);
      const bool last = step_ == options_.total_steps;
      if (!options_.checkpoint_dir.empty() &&
          (last || (options_.checkpoint_every > 0 && step_ % options_.checkpoint_every == 0)))
        save_checkpoint(checkpoint_path(options_.checkpoint_dir));
    }
  } catch (...) {
    if (options_.progress != nullptr) options_.progress->finish();
    throw;
  }
  if (options_.progress != nullptr) options_.progress->finish();
  summary.seconds = seconds_since(start);
  summary.last_checkpoint = last_checkpoint_;
  return summary;
}

}  // namespace minitrain
