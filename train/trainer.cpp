// The training loop. Reads top to bottom: run() calls train_step() until the last step, reading
// the steps' losses from the device when a value is due (a log line, the progress line, an
// evaluation, a checkpoint, the end) and reporting each step then; train_step() is a short
// sequence of named blocks: data, forward, loss, backward, clip and scale, optimizer, replica sync.

#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/checked_math.h"
#include "core/host_memory.h"
#include "core/process_cpu.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"
#include "kernels/loss/cross_entropy.h"
#include "kernels/reduce.h"
#include "nn/cross_entropy_loss.h"
#include "optim/clip.h"
#include "train/class_metrics.h"
#include "train/data_parallel_sync.h"
#include "train/device_totals.h"
#include "train/validation.h"

namespace minitrain {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A non-negative integer of a checkpoint's metadata, or `fallback` when the checkpoint lacks it.
int64_t meta_int(const std::map<std::string, std::string>& meta, const char* key,
                 int64_t fallback) {
  const auto it = meta.find(key);
  if (it == meta.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return fallback;  // load_checkpoint names the malformed field
  }
}

// The held-out record in a checkpoint's metadata ("validation"), and back.
std::string val_record_json(const std::optional<ValMetrics>& best, int64_t best_step,
                            int64_t evals_since_best, bool early_stopped) {
  nlohmann::json j;
  j["best_step"] = best_step;
  j["evals_since_best"] = evals_since_best;
  j["early_stopped"] = early_stopped;
  if (best) {
    j["best_loss"] = best->loss;
    j["best_accuracy"] = best->accuracy;  // NaN -> null: not a classifier
    j["best_topk_accuracy"] = best->topk_accuracy;
    j["best_rows"] = best->rows;
    j["topk"] = best->topk;
  }
  return j.dump();
}

// One process training alone: the ReplicaSync of a Trainer given none (stateless, so shared).
ReplicaSync& one_process() {
  static ReplicaSync sync;
  return sync;
}

double json_number_or_nan(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? j[key].get<double>()
                                               : std::numeric_limits<double>::quiet_NaN();
}

}  // namespace

int64_t steps_for_epochs(int64_t epochs, int64_t batches_per_epoch, int64_t grad_accum) {
  MT_CHECK_AS(ValueError, epochs >= 1 && batches_per_epoch >= 1 && grad_accum >= 1,
              "steps_for_epochs: epochs ", epochs, ", batches per epoch ", batches_per_epoch,
              " and grad_accum ", grad_accum, " must each be >= 1");
  const int64_t batches =
      checked_mul(epochs, batches_per_epoch, "steps_for_epochs: epochs x batches per epoch");
  return batches / grad_accum + (batches % grad_accum != 0);
}

void check_parameters_finite(Module& model, const std::string& when) {
  for (const auto& [name, p] : model.named_parameters()) {
    const double m = max_abs(p->value).item();
    if (!std::isfinite(m))
      MT_THROW(
          NonFiniteError, when, ": parameter '", name, "' holds ",
          std::isnan(m) ? "NaN" : "infinite",
          " values; the learning rate is probably too high (try a lower --lr or --clip-grad-norm)");
  }
}

Trainer::Trainer(Module& model, Optimizer& optimizer, DataLoader& loader, TrainerOptions options)
    : model_(model),
      optimizer_(optimizer),
      loader_(loader),
      options_(std::move(options)),
      sync_(options_.replica_sync != nullptr ? options_.replica_sync : &one_process()),
      device_(loader.options().device) {
  loss_ = options_.loss ? options_.loss : std::shared_ptr<Loss>(make_loss(LossOptions{}));
  MT_CHECK_AS(ValueError, options_.total_steps >= 1, "Trainer: total_steps must be >= 1, got ",
              options_.total_steps);
  MT_CHECK_AS(ValueError, options_.grad_accum >= 1, "Trainer: grad_accum must be >= 1, got ",
              options_.grad_accum);
  MT_CHECK_AS(ValueError, options_.checkpoint_every >= 0,
              "Trainer: checkpoint_every must be >= 0, got ", options_.checkpoint_every);
  MT_CHECK_AS(ValueError, sync_->world_size() >= 1, "Trainer: world_size must be >= 1, got ",
              sync_->world_size());
  if (options_.loss_scaling) scaler_.emplace(*options_.loss_scaling);
  // One process with every parameter on one GPU: the scaler stays on the device, the optimizer
  // skips on its flag there, and nothing is read inside the step (issue 35). With ranks the skip
  // must be agreed (any_rank_overflowed), and on the CPU a read is free: the host decides.
  bool one_gpu = device_.is_cuda() && sync_->world_size() == 1;
  for (const auto& [name, p] : model_.named_parameters())
    one_gpu = one_gpu && p->value.device() == device_;
  if (scaler_ && one_gpu) {
    scaler_->keep_on_device(device_);
    optimizer_.set_found_inf(scaler_->found_inf());
    scale_read_ = scaler_->scale();
  }
  // A classifier whose batches may count nothing (issue 30) decides that on the device too: the
  // loss counts the batches with a row to count, and a step with none is skipped on the
  // optimizer's flag (Note [a batch that counts nothing, on the device]), ours or the scaler's.
  // (Not under dp: its replicated optimizer steps each replica's own optimizer, which would not
  // see the flag.)
  nothing_counted_skips_ =
      one_gpu && dynamic_cast<DataParallelSync*>(sync_) == nullptr && !options_.labels_on_host &&
      dynamic_cast<const CrossEntropyLoss*>(loss_.get()) != nullptr && !every_batch_counts();
  if (nothing_counted_skips_ && !scaler_) {
    skip_flag_ = Tensor::zeros(Shape{1}, DType::Float32, device_);
    optimizer_.set_found_inf(skip_flag_);
  }
  if (options_.cuda_graph) {
    const std::string why = graph_unsupported(options_, optimizer_, device_);
    MT_CHECK_AS(ValueError, why.empty(), "Trainer: cuda_graph: the step cannot be captured: ", why);
    GraphStepOptions go;
    go.clip_grad_norm = options_.clip_grad_norm;
    if (scaler_) go.scaler = &*scaler_;  // kept on the device, or GraphStep names why not
    go.nothing_counted_skips = nothing_counted_skips_;
    graph_ = std::make_unique<GraphStep>(model_, *loss_, optimizer_, device_, go);
  }
  if (options_.total_batches == 0)
    options_.total_batches = options_.total_steps * options_.grad_accum;
  MT_CHECK_AS(ValueError, options_.total_batches > (options_.total_steps - 1) * options_.grad_accum,
              "Trainer: ", options_.total_batches, " batches leave nothing for step ",
              options_.total_steps, " (grad_accum ", options_.grad_accum, ")");
}

std::string Trainer::graph_unsupported(const TrainerOptions& options, const Optimizer& optimizer,
                                       Device device) {
  if (options.grad_accum != 1)
    return "gradient accumulation runs " + std::to_string(options.grad_accum) +
           " batches per step, a graph one";
  if (options.replica_sync != nullptr && options.replica_sync->world_size() > 1)
    return "a step of several ranks meets the others' collectives";
  const std::shared_ptr<Loss> loss =
      options.loss ? options.loss : std::shared_ptr<Loss>(make_loss(LossOptions{}));
  const std::string why = graph_step_unsupported(*loss, optimizer, device, GraphStepOptions{});
  if (why.empty() && loss->target_kind() == TargetKind::ClassIndices && options.labels_on_host)
    return "labels_on_host reads a classifier's labels on the host at every step";
  return why;
}

int64_t Trainer::graph_replays() const noexcept { return graph_ ? graph_->replays() : 0; }

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
  p.world_size = sync_->world_size();
  p.global_batch = global_batch();
  p.samples_seen = samples_seen_;
  p.epoch_samples = p.batch_index * p.global_batch;  // only an epoch's last batch is partial
  return p;
}

int64_t Trainer::map_batch_index(const std::string& path,
                                 const std::map<std::string, std::string>& meta) const {
  const int64_t world = meta_int(meta, "world_size", 1), batch = meta_int(meta, "global_batch", 0);
  const int64_t epoch = meta_int(meta, "epoch", 0), index = meta_int(meta, "batch_index", 0);
  if (batch <= 0)
    MT_THROW(ValueError, "cannot resume from '", path, "' on ", sync_->world_size(),
             " ranks: it does not record its batch layout (written by an older minitrain); resume "
             "it on ",
             world, " rank(s) with its original --batch-size");
  const int64_t offset = index * batch;  // rows of the epoch consumed, over all ranks
  const int64_t mine = global_batch();
  if (offset % mine != 0 || offset / mine >= loader_.batches_per_epoch())
    MT_THROW(ValueError, "cannot resume from '", path, "': it was written by ", world,
             " rank(s) x batch size ", batch / world, " (global batch ", batch, ") after ", offset,
             " rows of epoch ", epoch, " (from 0), which is not a batch boundary of this run's ",
             sync_->world_size(), " rank(s) x batch size ", loader_.options().batch_size,
             " (global batch ", mine,
             "); resume with a global batch (ranks x --batch-size) that divides ", offset,
             ", such as the original ", batch);
  return offset / mine;
}

void Trainer::save_checkpoint(const std::string& path) {
  // Every rank checks: the weights are the same on all, so all stop together on a bad one.
  check_parameters_finite(model_, "step " + std::to_string(step_));
  if (sync_->writes_files()) {
    std::map<std::string, std::string> meta = options_.checkpoint_metadata;
    meta["batches_per_epoch"] = std::to_string(loader_.batches_per_epoch());
    meta["grad_accum"] = std::to_string(options_.grad_accum);
    if (options_.validate)
      meta["validation"] =
          val_record_json(best_val_, best_step_, evals_since_best_, early_stopped_);
    if (scaler_) {
      nlohmann::json j(scaler_->state());
      j["skipped_steps"] = std::to_string(skipped_steps_);
      meta["grad_scaler"] = j.dump();
    }
    minitrain::save_checkpoint(path, model_, optimizer_, position(), meta);
  }
  sync_->after_checkpoint();
  last_checkpoint_ = path;
}

void Trainer::resume(const std::string& path) {
  const auto meta = read_checkpoint_metadata(path);
  // On another number of ranks the batches are counted differently: the position is then found
  // by global sample instead of by batch count. On the same number of ranks the batch size must
  // stay (batches_per_epoch below), as it always had to.
  const bool same_layout = meta_int(meta, "world_size", 1) == sync_->world_size();
  const int64_t bpe = loader_.batches_per_epoch();
  for (const auto& [key, want] : {std::pair<const char*, int64_t>{"batches_per_epoch", bpe},
                                  {"grad_accum", options_.grad_accum}}) {
    if (!same_layout && std::string(key) == "batches_per_epoch") continue;
    const auto it = meta.find(key);
    if (it != meta.end() && it->second != std::to_string(want))
      MT_THROW(ValueError, "cannot resume from '", path, "': it was written with ", key, " ",
               it->second, ", this run has ", want,
               " (resume with the settings of the original run)");
  }
  const int64_t mapped_index =
      same_layout ? -1 : map_batch_index(path, meta);  // before anything changes
  const CheckpointPosition p = load_checkpoint(path, model_, optimizer_);
  sync_->after_weights_loaded();
  if (p.step > options_.total_steps)
    MT_THROW(ValueError, "cannot resume from '", path, "': it is at step ", p.step,
             ", past this run's last step ", options_.total_steps,
             " (give more --steps or --epochs)");
  step_ = p.step;
  batches_seen_ = same_layout ? p.batches_seen : p.epoch * bpe + mapped_index;
  samples_seen_ = p.samples_seen;
  if (options_.generator != nullptr) options_.generator->set_state(p.rng_seed, p.rng_offset);
  loader_.seek(batches_seen_ / bpe, batches_seen_ % bpe);
  last_checkpoint_ = path;
  const auto gs = meta.find("grad_scaler");
  if (scaler_ && gs != meta.end()) {
    const nlohmann::json j = nlohmann::json::parse(gs->second, nullptr, false);
    MT_CHECK_AS(IoError, j.is_object(), "cannot resume from '", path,
                "': its 'grad_scaler' metadata is not a JSON object: ", gs->second);
    std::map<std::string, std::string> state;
    for (const auto& [key, value] : j.items())
      if (value.is_string()) state[key] = value.get<std::string>();
    scaler_->load_state(state);
    skipped_steps_ = meta_int(state, "skipped_steps", 0);
    scale_read_ = scaler_->scale();
  }
  const auto v = meta.find("validation");
  if (options_.validate && v != meta.end()) {
    const nlohmann::json j = nlohmann::json::parse(v->second, nullptr, false);
    MT_CHECK_AS(IoError, j.is_object(), "cannot resume from '", path,
                "': its 'validation' metadata is not a JSON object: ", v->second);
    best_step_ = j.value("best_step", int64_t{0});
    evals_since_best_ = j.value("evals_since_best", int64_t{0});
    early_stopped_ = j.value("early_stopped", false);
    if (j.contains("best_loss")) {
      ValMetrics b;
      b.loss = json_number_or_nan(j, "best_loss");
      b.accuracy = json_number_or_nan(j, "best_accuracy");
      b.topk_accuracy = json_number_or_nan(j, "best_topk_accuracy");
      b.rows = j.value("best_rows", int64_t{0});
      b.topk = j.value("topk", int64_t{1});
      best_val_ = b;
    }
  }
}

bool Trainer::evaluation_due(const StepStats& s) const {
  if (!options_.validate) return false;
  return s.epoch_end || s.step == options_.total_steps ||
         (options_.eval_every > 0 && s.step % options_.eval_every == 0);
}

bool Trainer::checkpoint_due(int64_t step, bool stop) const {
  if (options_.checkpoint_dir.empty()) return false;
  const bool last = step == options_.total_steps;
  return last || (stop && !last) ||
         (options_.checkpoint_every > 0 && step % options_.checkpoint_every == 0);
}

bool Trainer::evaluate(StepStats& s) {
  s.val = options_.validate();
  if (s.val->interrupted) {  // a stop between held-out batches: stop as after a step (issue 30)
    s.val.reset();           // part of the rows: no val_loss, no best, no patience spent
    stop_agreed_ = true;
    return false;
  }
  // NaN never improves: a diverged model is not the best one.
  if (!best_val_ || s.val->loss < best_val_->loss) {
    if (std::isfinite(s.val->loss)) {
      // Saved first: a best that --save-best could not write (a full disk) is not recorded as
      // saved, in the summary or in the checkpoint the failure leaves.
      if (options_.on_best) options_.on_best(s.step, *s.val);
      best_val_ = s.val;
      best_step_ = s.step;
      evals_since_best_ = 0;
      return false;
    }
  }
  ++evals_since_best_;
  // At the last step the run ends anyway: that is no early stop (and a longer resumed run goes on).
  early_stopped_ = options_.early_stop > 0 && evals_since_best_ >= options_.early_stop &&
                   s.step < options_.total_steps;
  return early_stopped_;
}

bool Trainer::unscale_gradients(StepStats& s) {
  if (!scaler_) return true;
  if (scaler_->kept_on_device()) {
    // The flag stays on the device: the optimizer skips on it, the scale's update runs there,
    // and the scale, the flag and the skip are read later with the loss (read_unreported).
    scaler_->unscale_queued(model_.named_parameters());
    Tensor record = totals_->scaler_record();
    // A step that counted nothing leaves the scale as it is and raises the flag (issue 35).
    const Tensor batches = nothing_counted_skips_ ? totals_->batch_count() : Tensor();
    scaler_->update_queued(&record, batches.defined() ? &batches : nullptr);
    return true;
  }
  s.loss_scale = scaler_->scale();
  // Under ddp the gradients were all-reduced, so an overflow on one rank is an inf on all. Local
  // SGD keeps them local: the ranks then agree on skipping (ReplicaSync::any_rank_overflowed).
  const bool found_inf = sync_->any_rank_overflowed(!scaler_->unscale(model_.named_parameters()));
  scaler_->update(found_inf);
  if (found_inf) ++skipped_steps_;
  s.skipped = found_inf;
  s.skipped_steps = skipped_steps_;
  return !found_inf;
}

// ---- one step: data, forward, loss, backward, gradient sync, clip and scale, optimizer ----
//
// The step queues its work and returns without waiting for the device (issue 35): its loss (and
// clipping norm) are added to device-side totals that run() reads when a value is needed. Where a
// read costs nothing (the CPU) or is needed at once (ddp's loss all-reduce), the step reads its
// loss before the update, so that a non-finite loss stops the run with the weights untouched.

StepStats Trainer::train_step() {
  if (graph_) return graph_train_step();
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  StepStats s = begin_step();
  const int64_t batches = batches_for_step(s.step);
  const int64_t batches_before = batches_seen_;
  // correct, counted rows (classifiers); the loss sum and the number of batches with a row to count
  std::vector<double> counts{0.0, 0.0, 0.0, 0.0};
  for (int64_t b = 0; b < batches; ++b) {
    const Batch batch = next_batch(s, b);
    forward_loss_backward(batch, b, batches, counts, s);
  }
  totals_->set_batches(static_cast<int64_t>(counts[3]));  // the loss's mean: over counted batches
  end_batches(s, batches_before);
  const bool read = read_in_step();
  if (read) read_loss_now(s, counts);
  count_rows(counts, batches, read, s);
  if (!read || std::isfinite(s.loss) || s.nothing_counted) {
    const bool take = !s.nothing_counted && unscale_gradients(s);  // no update from nothing
    std::optional<PendingGradNorm> norm;
    if (take) norm = clip_gradients();
    if (take) optimizer_.step();
    if (norm) record_grad_norm(*norm, s);
    end_update(s);
  }
  record_step_time(s, start, cpu_start);
  return s;
}

// The same step through GraphStep (TrainerOptions::cuda_graph): one batch, one process
// (graph_unsupported), so only the loss (and norm), a classifier's counts and label check, and the
// loss scaler's record are left to record.
StepStats Trainer::graph_train_step() {
  const auto start = Clock::now();
  const double cpu_start = process_cpu_seconds();
  StepStats s = begin_step(/*zero_grad=*/false);  // GraphStep zeroes them inside the graph
  const int64_t batches_before = batches_seen_;
  const Batch batch = next_batch(s, 0);
  const Tensor target = batch.y.to(batch.x.device());
  GraphStep::Result r = graph_->step(batch.x, target);
  // The replayed loss is the graph's tensor, overwritten by the next replay: this stream waits for
  // the step (GraphStep joins it) and the next replay waits for this add (GraphStep forks from
  // here), so the add reads this step's value.
  open_totals(r.loss, 0, 1);
  totals_->add_loss(r.loss);
  if (r.class_totals.defined()) {  // a classifier: its counts and check, read with the loss
    totals_->add_class_totals(r.class_totals);
    logit_columns_ = r.classes;
  }
  if (r.scaler_record.defined()) {  // the scaler's record, from the graph's buffer into the slot
    Tensor slot = totals_->scaler_record();
    copy_bytes_async(slot.raw_data(), device_, r.scaler_record.raw_data(), device_,
                     r.scaler_record.nbytes(), current_stream(device_));
  }
  count_batch(batch, s);
  end_batches(s, batches_before);
  if (options_.clip_grad_norm > 0) record_grad_norm(r.grad_norm, s);
  end_update(s);
  record_step_time(s, start, cpu_start);
  return s;
}

StepStats Trainer::begin_step(bool zero_grad) {
  StepStats s;
  s.step = step_ + 1;
  s.total_steps = options_.total_steps;
  // The schedule is a factor on the optimizer's own base rate (optim/schedule.h).
  if (options_.schedule) optimizer_.set_lr_factor(options_.schedule->factor_at(s.step));
  s.lr = optimizer_.lr();
  s.loss = std::numeric_limits<double>::quiet_NaN();  // until read
  s.device = device_.str();
  model_.train();
  if (zero_grad) model_.zero_grad();
  return s;
}

Batch Trainer::next_batch(StepStats& s, int64_t b) {
  const auto wait_start = Clock::now();
  Batch batch = loader_.next();
  s.data_wait_ms += seconds_since(wait_start) * 1e3;
  if (b == 0) s.epoch = batch.epoch + 1;
  return batch;
}

void Trainer::forward_loss_backward(const Batch& batch, int64_t b, int64_t batches,
                                    std::vector<double>& counts, StepStats& s) {
  // forward
  const Tensor out = model_.forward(batch.x);
  // A 16-bit prediction (mixed precision) is widened: the loss is float32 (torch.autocast).
  Tensor pred = out;
  if (is_half(out.dtype())) {
    pred = widened_pred_.get(out.shape(), DType::Float32, out.device());
    cast(pred, out);
  }
  // Under model parallelism the batch arrives on the first stage's device and the prediction
  // leaves the last stage's: the targets follow the prediction (a no-op on one device).
  const Tensor target = batch.y.to(pred.device());

  // loss: its value joins the step's device-side total (read later), its gradient goes back
  open_totals(pred, b, batches);
  const bool classifier = loss_->target_kind() == TargetKind::ClassIndices;
  // On one GPU with every row counted (issue 35): the labels are checked and the rows counted on
  // the device, read with the loss (Note [cross_entropy's targets on the device]).
  auto* on_device =
      classifier && counts_on_device() ? dynamic_cast<CrossEntropyLoss*>(loss_.get()) : nullptr;
  if (on_device != nullptr) on_device->set_target_check(totals_->target_check());
  // A batch that may count nothing is counted there too (its loss then 0, its gradient zero)
  // and sets the optimizer's skip flag (the scaler's update does under float16).
  if (on_device != nullptr && nothing_counted_skips_)
    on_device->set_batch_count(totals_->batch_count(), scaler_ ? Tensor() : skip_flag_);
  Tensor grad;
  Tensor loss;
  try {
    loss = loss_->forward_backward(pred, target, grad);
  } catch (...) {
    if (on_device != nullptr) on_device->set_target_check(Tensor());
    if (on_device != nullptr) on_device->set_batch_count(Tensor());
    throw;
  }
  if (on_device != nullptr) on_device->set_target_check(Tensor());
  if (on_device != nullptr) on_device->set_batch_count(Tensor());
  ClassCounts c;
  if (on_device != nullptr) {
    Tensor counts = totals_->class_counts();
    // before backward: a module may reuse its output's memory (the same stream reads it first)
    cross_entropy_count_correct(counts, pred, target, loss_->options().ignore_index);
    logit_columns_ = pred.size(1);
  } else if (classifier) {
    // before backward: a module may reuse its output's memory
    c = count_correct(pred, target, 1, loss_->options().ignore_index);
    counts[0] += c.correct;
    counts[1] += c.counted;
  }
  // A batch whose every row is ignore_index or of a class weighted 0 has torch's 0/0: a NaN loss
  // and gradient. It contributes nothing (issue 30): a zero gradient (backward still runs, so
  // every ddp rank joins the all-reduce) and no loss. On the device path the loss did that
  // already (a loss of 0, counted there: Note [a batch that counts nothing, on the device]);
  // on the host path, without class weights the rows counted above decide, with them the loss's
  // own divisor (one more copy of the labels).
  const bool counted = !classifier || on_device != nullptr ||
                       (loss_->options().class_weights.empty()
                            ? c.counted > 0
                            : mean_divisor(batch.y.to(Device::cpu()), loss_->options(),
                                           TargetKind::ClassIndices) > 0);
  if (counted) {
    totals_->add_loss(loss);
    counts[3] += 1;
  } else {
    zero_(grad);
  }

  // backward: 1/batches as dividing the loss in torch; times the loss scale (a power of two:
  // exact)
  if (scaler_) {
    scaler_->scale_loss_gradient(grad, static_cast<double>(batches));
  } else if (batches != 1) {
    scale(grad, grad, 1.0 / static_cast<double>(batches));
  }
  sync_->before_backward(b == batches - 1);
  if (out.dtype() != grad.dtype()) {
    Tensor rounded = rounded_grad_.get(grad.shape(), out.dtype(), grad.device());
    cast(rounded, grad);
    grad = rounded;
  }
  model_.backward(grad);

  count_batch(batch, s);
}

// ---- the bookkeeping both steps (eager and graph) share ----

void Trainer::open_totals(const Tensor& on, int64_t b, int64_t batches) {
  if (!totals_) totals_.emplace(on.device());
  if (b == 0) totals_->begin_step(batches);
}

void Trainer::count_batch(const Batch& batch, StepStats& s) {
  // Every rank's batch has this many rows (the sampler gives each rank the same count).
  const int64_t rows = batch.x.size(0) * sync_->world_size();
  s.samples += rows;
  samples_seen_ += rows;
  ++batches_seen_;
}

void Trainer::end_update(const StepStats& s) {
  // Local SGD averages the replicas here when the weights are read after this step.
  sync_->after_update({s.step, s.step == options_.total_steps, checkpoint_due(s.step, stop_agreed_),
                       evaluation_due(s)});
  // No device synchronize here (issue 35): the update stays queued while the host prepares the
  // next step.
  step_ = s.step;
}

void Trainer::end_batches(StepStats& s, int64_t batches_before) {
  const int64_t bpe = loader_.batches_per_epoch();
  s.epoch_end =
      batches_seen_ / bpe > batches_before / bpe || batches_seen_ == options_.total_batches;
  stop_agreed_ = options_.stop_requested != nullptr && options_.stop_requested->load() != 0;
}

void Trainer::count_rows(std::vector<double>& counts, int64_t batches, bool read, StepStats& s) {
  if (loss_->target_kind() != TargetKind::ClassIndices) return;
  sync_->sum_over_ranks(counts);
  if (counts[1] > 0) s.accuracy = counts[0] / counts[1];
  s.nothing_counted = counts[3] == 0;
  // A batch that counted nothing on some rank: the loss read is the mean over the batches that
  // did, of every rank (one process's own mean already is).
  const double ranks = sync_->world_size();
  if (read && ranks > 1 && counts[3] < static_cast<double>(batches) * ranks)
    s.loss = counts[2] / counts[3];
}

bool Trainer::read_in_step() const {
  // On the CPU a read is free; ddp's loss all-reduce (reduce_loss) needs the value every step.
  return sync_->world_size() > 1 || totals_->device().is_cpu();
}

bool Trainer::counts_on_device() const {
  // The mean's divisor is formed on the device (a count, or with class weights their sum in the
  // host's row order); with every row counted and every class weight above 0 no batch is one to
  // leave out (issue 30), and otherwise the device counts the batches that count and the
  // optimizer skips a step with none (nothing_counted_skips_): nothing about the labels is needed
  // on the host.
  if (read_in_step() || options_.labels_on_host) return false;
  if (dynamic_cast<const CrossEntropyLoss*>(loss_.get()) == nullptr) return false;
  return every_batch_counts() || nothing_counted_skips_;
}

bool Trainer::every_batch_counts() const {
  if (!options_.every_row_counts) return false;
  for (double w : loss_->options().class_weights)
    if (!(static_cast<float>(w) > 0)) return false;  // a batch of its class would count nothing
  return true;
}

void Trainer::read_loss_now(StepStats& s, std::vector<double>& counts) {
  const StepTotals t = totals_->read().back();
  counts[2] = t.loss_sum;
  // The global batch's loss (ddp), and whether any rank asked to stop; NaN when nothing counted.
  s.loss = sync_->reduce_loss(counts[3] > 0 ? t.loss : 0.0, stop_agreed_);
  if (counts[3] == 0 && sync_->world_size() == 1) s.loss = t.loss;
}

std::optional<PendingGradNorm> Trainer::clip_gradients() {
  // With ddp the gradients were all-reduced, so they are the same on every rank: the local norm
  // is already the global one, and every rank clips by the same factor. (Local SGD: each rank
  // clips its own gradients by their own norm, as it steps on its own.) Clipping decides on the
  // device (issue 35).
  if (options_.clip_grad_norm <= 0) return std::nullopt;
  return clip_grad_norm_deferred_(model_.named_parameters(), options_.clip_grad_norm,
                                  /*foreach=*/true, &clip_workspace_);
}

void Trainer::record_grad_norm(const PendingGradNorm& norm, StepStats& s) {
  // One device's sum of squares joins the step's totals (read with its loss); the step that read
  // its loss reads the norm too, and gradients on several devices were read by the clipping.
  if (!read_in_step() && norm.sum_sq.size() == 1 &&
      norm.sum_sq.front().device() == totals_->device()) {
    totals_->add_grad_sum_sq(norm.sum_sq.front());
  } else {
    s.grad_norm = norm.read();
  }
}

void Trainer::record_step_time(StepStats& s, Clock::time_point start, double cpu_start) const {
  s.step_ms = seconds_since(start) * 1e3;
  s.cpu_ms = (process_cpu_seconds() - cpu_start) * 1e3;
  s.samples_per_s = s.step_ms > 0 ? static_cast<double>(s.samples) / (s.step_ms * 1e-3) : 0.0;
  const MemoryStats mem = memory_stats(device_);
  s.memory_in_use = mem.in_use;
  s.memory_peak = mem.peak;
  s.host_memory_peak = host_memory_peak_bytes();
  if (options_.gpu_monitor != nullptr) s.gpu = options_.gpu_monitor->sample();
}

// ---- reading the device's values, and reporting the steps ----

bool Trainer::values_due(const StepStats& s) const {
  if (read_in_step() || options_.on_step || totals_->full()) return true;
  if (s.step == options_.total_steps || stop_agreed_) return true;
  if (evaluation_due(s) || checkpoint_due(s.step, false)) return true;
  if (options_.log != nullptr && s.step % options_.log->every() == 0) return true;
  return options_.progress != nullptr && options_.progress->draws(s.step);
}

void Trainer::read_unreported() {
  const std::vector<StepTotals> t = totals_->read();
  MT_CHECK(t.size() <= unreported_.size(), "Trainer: ", t.size(), " steps' totals for ",
           unreported_.size(), " unreported steps");
  const std::size_t first = unreported_.size() - t.size();
  for (std::size_t i = 0; i < t.size(); ++i) {
    StepStats& s = unreported_[first + i];
    // A label the device's check refused: the host check's error, for its row.
    throw_bad_cross_entropy_target("cross_entropy_forward_backward", t[i].target_check,
                                   logit_columns_, loss_->options().ignore_index);
    if (t[i].counted_rows && t[i].counted > 0) s.accuracy = t[i].correct / t[i].counted;
    s.loss = t[i].loss;
    // Counted on the device: a step none of whose batches counted made no update, and, as on the
    // host path, neither unscaled nor clipped: no scale, skip or norm of it is reported.
    if (t[i].batches_on_device) s.nothing_counted = t[i].counted_batches == 0;
    if (t[i].scaled && !s.nothing_counted) {  // the scaler kept on the device: its record
      s.loss_scale = t[i].loss_scale;
      s.skipped = t[i].skipped;
      if (s.skipped) ++skipped_steps_;
      scale_read_ = t[i].scale_after;
    }
    if (scaler_ && scaler_->kept_on_device()) s.skipped_steps = skipped_steps_;
    // A skipped step is not clipped on the host path either: its norm (inf or NaN) is not shown.
    if (t[i].grad_norm >= 0 && !s.skipped && !s.nothing_counted) s.grad_norm = t[i].grad_norm;
  }
}

bool Trainer::report_step(StepStats& s, bool newest, TrainSummary& summary, RunMeans& means) {
  // The divergence check happens here, when the loss is read: with the loss kept on the device
  // the steps after a non-finite one were queued before it was seen (docs/gpu_step.md).
  const bool finite = std::isfinite(s.loss) || s.nothing_counted;
  bool early_stop = false, evaluated = false;
  try {
    // Evaluations and checkpoints are read points: only the newest step read can have one due.
    early_stop = newest && finite && evaluation_due(s) && evaluate(s);  // --save-best writes there
    evaluated = true;
    if (options_.log != nullptr) options_.log->write(s);
  } catch (const IoError& e) {
    // A write that fails after a good step (a full disk for the log or --save-best) ends the
    // run, but the steps trained are checkpointed first, so nothing trained is lost (issue 30).
    // One process only: ddp's other ranks would wait in a checkpoint this rank alone reaches.
    if (!finite || options_.checkpoint_dir.empty() || sync_->world_size() > 1) throw;
    if (!evaluated && options_.log != nullptr) {  // --save-best failed: the log may still work
      try {
        options_.log->write(s);
        options_.log->flush_pending();
      } catch (const IoError&) {  // full for it too: the error below says enough
      }
    }
    std::string kept;
    try {
      save_checkpoint(checkpoint_path(options_.checkpoint_dir));
      kept = "the checkpoint of step " + std::to_string(step_) + " was written first ('" +
             last_checkpoint_ + "'): make room and resume with --resume";
    } catch (const std::exception& c) {
      kept = std::string("the checkpoint could not be written either: ") + c.what();
    }
    MT_THROW(IoError, e.what(), "; ", kept);
  }
  if (!finite) {
    if (options_.log != nullptr) options_.log->flush_pending();  // the line that shows it
    std::string kept = last_checkpoint_.empty()
                           ? std::string("no checkpoint was written")
                           : "the last good checkpoint is '" + last_checkpoint_ + "'";
    // Step 1's loss comes from the initial weights, before any update: no learning rate made it.
    if (s.step == 1)
      MT_THROW(NonFiniteError, "step 1: the loss is ", s.loss, "; stopping (", kept,
               "). It is the initial weights' loss on the first batch, before any update, so the "
               "learning rate is not the cause: check that the data's targets are in the range "
               "the loss ",
               loss_->name(), " takes and are finite (docs/optimizers_and_losses.md)");
    MT_THROW(NonFiniteError, "step ", s.step, ": the loss is ", s.loss, "; stopping (", kept,
             "). The learning rate is probably too high: try a lower --lr (now ", s.lr,
             ") or --clip-grad-norm");
  }
  if (options_.progress != nullptr) options_.progress->update(s);
  if (std::isnan(summary.first_loss)) summary.first_loss = s.loss;
  if (!s.nothing_counted) summary.last_loss = s.loss;
  summary.last_step = s.step;
  summary.samples += s.samples;
  if (s.epoch != summary.epoch) {
    summary.epoch = s.epoch;
    means = RunMeans{};
  }
  if (!s.nothing_counted) {  // a step with nothing to count is no part of the epoch's mean
    means.loss_sum += s.loss;
    means.accuracy_sum += s.accuracy;
    ++means.steps;
  }
  summary.epoch_loss = means.loss_sum / static_cast<double>(means.steps);
  summary.epoch_accuracy = means.accuracy_sum / static_cast<double>(means.steps);
  if (s.val) summary.last_val = s.val;
  if (scaler_) summary.loss_scale = scaler_->kept_on_device() ? scale_read_ : scaler_->scale();
  summary.skipped_steps = s.skipped_steps;
  summary.nothing_counted_steps += s.nothing_counted ? 1 : 0;
  if (options_.on_step) options_.on_step(s);
  if (!newest) return false;
  const bool last = s.step == options_.total_steps;
  const bool stop = (stop_agreed_ || early_stop) && !last;
  if (checkpoint_due(s.step, stop)) save_checkpoint(checkpoint_path(options_.checkpoint_dir));
  if (last && stop_agreed_ && evaluation_due(s) && !s.val) {  // the last evaluation, stopped
    summary.stopped_early = true;
    summary.stop_signal = options_.stop_requested != nullptr ? options_.stop_requested->load() : 0;
  }
  if (early_stop) {
    if (options_.log != nullptr) options_.log->flush_pending();
    summary.early_stopped = true;
    return true;
  }
  if (stop) {
    if (options_.log != nullptr) options_.log->flush_pending();  // a partial interval
    summary.stopped_early = true;
    summary.stop_signal = options_.stop_requested != nullptr ? options_.stop_requested->load() : 0;
    return true;
  }
  return false;
}

TrainSummary Trainer::run() {
  TrainSummary summary;
  summary.first_step = step_ + 1;
  summary.last_step = step_;
  const auto start = Clock::now();
  RunMeans means;  // the current epoch's step losses (and accuracies), for its mean
  try {
    // A run that early stopping ended stays ended: resuming it trains nothing.
    while (step_ < options_.total_steps && !early_stopped_) {
      unreported_.push_back(train_step());
      if (!values_due(unreported_.back())) continue;  // its loss stays on the device
      read_unreported();
      bool ended = false;
      for (std::size_t i = 0; i < unreported_.size() && !ended; ++i)
        ended = report_step(unreported_[i], i + 1 == unreported_.size(), summary, means);
      unreported_.clear();
      if (ended) break;
    }
  } catch (...) {
    unreported_.clear();
    if (options_.progress != nullptr) options_.progress->finish();
    throw;
  }
  if (options_.progress != nullptr) options_.progress->finish();
  summary.seconds = seconds_since(start);
  summary.last_checkpoint = last_checkpoint_;
  summary.best_val = best_val_;
  summary.best_step = best_step_;
  summary.early_stopped = summary.early_stopped || early_stopped_;
  return summary;
}

}  // namespace minitrain
