#pragma once
// The optimizer interface: torch.optim's update formulas over a module's named parameters.
// State (momentum buffers, Adam moments) is created lazily at the first step, as in torch, and
// can be saved to and restored from named tensors for checkpoints.

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/optimizer_step.h"
#include "nn/parameter.h"
#include "optim/schedule.h"

namespace minitrain {

struct OptimizerInfo;  // a row of optimizer_table() (optim/make_optimizer.h)

// Note [one row per optimizer]: MT_OPTIMIZERS is the one list of the optimizer classes. Each
// declares `static std::vector<OptimizerInfo> rows()`, defined in its own file beside its step:
// its rows of optimizer_table() (the name --optimizer takes, how to make it, the settings it
// takes), so make_optimizer, --optimizer's help and its messages know it with no line elsewhere.
// Its per-element math and its kernels' row are in kernels/optim/optimizer_math.h (the same Note
// there); docs/optimizers_and_losses.md, "Adding an optimizer", is the recipe.
#define MT_OPTIMIZERS(X) X(SGD) X(Adam) X(RMSprop)

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient (parameters whose grad is undefined are
  /// skipped, as torch skips grad=None).
  virtual void step() = 0;
  /// torch's zero_grad(set_to_none): by default leaves every gradient undefined, its buffer kept
  /// for the next backward (Note [released gradients] in nn/parameter.h); with false, zeroes the
  /// gradients that exist.
  void zero_grad(bool set_to_none = true);

  /// The current rate (torch's param_group['lr']): the base rate times the schedule's factor.
  double lr() const noexcept { return lr_; }
  /// The rate it was built with (options().lr; torch's initial_lr), which a schedule scales.
  virtual double base_lr() const noexcept = 0;
  /// lr() = (base_lr() * f.decay) * f.warmup: a schedule's step (LRSchedule::factor_at); {}: the
  /// base rate. The factors are the schedule's; ValueError for one < 0 or non-finite.
  void set_lr_factor(const LRFactor& f) {
    MT_CHECK_AS(
        ValueError,
        std::isfinite(f.decay) && f.decay >= 0.0 && std::isfinite(f.warmup) && f.warmup >= 0.0,
        name(), ": a learning-rate factor must be finite and >= 0, got decay ", f.decay,
        " and warm-up ", f.warmup);
    lr_ = (base_lr() * f.decay) * f.warmup;  // the rounding of torch's chained decay, then warm-up
  }
  void set_lr(double lr);  ///< the current rate directly; ValueError for lr < 0 or non-finite
  int64_t steps() const noexcept { return steps_; }
  const NamedParameters& parameters() const noexcept { return params_; }
  virtual std::string name() const = 0;  ///< "sgd", "adam", "adamw", "rmsprop"

  /// State tensors named "<param name>.<slot>" ("0.weight.exp_avg", "2.bias.momentum_buffer"),
  /// on the CPU.
  virtual std::vector<std::pair<std::string, Tensor>> state_tensors() const = 0;
  /// Scalars as exact strings, for a checkpoint's metadata: "optimizer" (name()), "steps", "lr"
  /// (the current rate), "initial_lr" (base_lr()), the hyperparameters ("momentum", "beta1",
  /// "amsgrad" = "true"/"false", ...) and for Adam each stepped parameter's own step count "<param
  /// name>.step".
  virtual std::map<std::string, std::string> state_scalars() const;
  /// Restores what state_tensors()/state_scalars() gave; validates names and shapes first and
  /// throws (ValueError / ShapeError naming the key) without changing anything on a mismatch.
  /// As torch's load_state_dict, it also restores lr and the hyperparameters found among the
  /// scalars, so a loaded optimizer continues exactly as the saved one would have; the
  /// "optimizer" scalar must be this optimizer's name(). Parameters without saved state start
  /// afresh (state created at their next step).
  virtual void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                          const std::map<std::string, std::string>& scalars) = 0;

  // Note [capturable step]: a CUDA graph replays the kernels of one captured step with the
  // arguments they had then, so a learning rate or bias correction passed by value would repeat.
  // A capturable optimizer (torch's capturable=True) splits step() in two: prepare_step(), the
  // host half, advances the step counts, creates state, and stores the step's factors in a small
  // device buffer (one launch: Note [step scalars on the device] in
  // kernels/optim/multi_tensor_optim.h); queue_step(), the device half, queues the update
  // kernels, which read the factors there and so can be captured once and replayed. step() does
  // both; the bits equal those of the non-capturable step.
  virtual bool supports_capturable() const { return false; }
  /// ValueError where unsupported (an optimizer without the two halves), or where the parameters
  /// are not all on one CUDA device (checked at the next prepare_step).
  void set_capturable(bool on);
  bool capturable() const noexcept { return capturable_; }
  /// The host half of a capturable step (throws ValueError unless capturable()).
  virtual void prepare_step();
  /// The device half: the launches planned by the last prepare_step (ValueError without one).
  virtual void queue_step();
  /// What queue_step launches, as numbers: equal plans launch the same kernels on the same memory
  /// (the parameter groups, kernel variants and the factors' device address), so a graph captured
  /// under one plan may replay under an equal one and not otherwise.
  const std::vector<int64_t>& step_plan() const noexcept { return plan_; }

  /// Note [skip on the device] (kernels/optim/skip_on_device.h): with a flag (float32 [1] on the
  /// parameters' device; dynamic loss scaling's found_inf), each step() queues an update that
  /// the device skips when the flag is non-zero at that point of the queue, as torch's fused
  /// optimizers do, so the host never reads it. A skipped step does not count: the per-parameter
  /// counts that Adam's bias corrections and SGD's first momentum step depend on then live on the
  /// device, and state_scalars()/state_tensors() read them back (a blocking copy; checkpoints).
  /// An undefined tensor turns it off (the counts come back to the host). ValueError for
  /// parameters on several devices (checked at the step). With capturable on too (a float16 step
  /// as one CUDA graph), queue_step reads the flag and the counts at fixed addresses, which the
  /// plan lists: Note [a captured skippable step] in optimizer.cpp.
  void set_found_inf(const Tensor& flag);
  const Tensor& found_inf() const noexcept { return found_inf_; }

 protected:
  /// The derived constructor starts the rate at its base rate: set_lr_factor({}).
  explicit Optimizer(NamedParameters params);
  /// Stores `bytes` in the factor buffer on `device` (created, or grown, as needed).
  void store_scalars(const std::vector<unsigned char>& bytes, Device device);
  /// Note [capturable step] for optimizers that launch per parameter group (Adam, SGD): plan_
  /// becomes, per group, the offset of its factors (`append_factors(g, dtype, bytes)` appends
  /// them for the group's element type and returns where), `variant(g)` (what picks the kernel),
  /// its size, then per member its index and the addresses of `members(i)`; and last the factor
  /// buffer's address, once the factors are stored. ValueError for groups on several devices.
  void plan_grouped_step(
      const std::vector<std::vector<std::size_t>>& groups,
      const std::function<std::size_t(std::size_t g, DType dtype, std::vector<unsigned char>&)>&
          append_factors,
      const std::function<int64_t(std::size_t g)>& variant,
      const std::function<std::vector<const Tensor*>(std::size_t i)>& members);
  const void* scalars_at(std::size_t offset) const;
  NamedParameters params_;
  double lr_ = 0.0;  // the current rate: base_lr() times the schedule's factors
  int64_t steps_ = 0;
  bool capturable_ = false;
  std::vector<int64_t> plan_;  // empty: nothing prepared
  Tensor scalars_;             // the capturable step's factors, on the parameters' device

  // Note [skip on the device]: per parameter, a pair of float counts on the flag's device.
  bool skipping() const noexcept { return found_inf_.defined(); }
  /// The counts from the host's (`host[i]` steps taken by parameter i), before the next step.
  void seed_counts(const std::vector<int64_t>& host);
  bool counts_seeded() const noexcept { return counts_.defined(); }
  /// Parameter i's current count (device memory), and, after the launch, the other element.
  float* count_of(std::size_t i);
  void flip_count(std::size_t i) { count_at_[i] ^= 1; }
  /// A captured step's alternative to flip_count: copies the element the launch wrote back into
  /// the current one (a device-to-device copy queued after it), so the addresses stay fixed.
  void settle_count(std::size_t i);
  /// Appends the skipping step's addresses to plan_ (the flag, each parameter's current count,
  /// and `extra`, Adam's bias table): equal plans then read the same memory.
  void plan_skip(const Tensor& extra = Tensor());
  /// Every parameter's count, read back (blocks until the queued steps have run).
  std::vector<int64_t> read_counts() const;
  /// Checks that every parameter with a gradient is on the flag's device (ValueError naming
  /// one), before the step changes anything.
  void check_skip_device() const;
  /// Called when the flag is turned off: the subclass takes its counts back (read_counts()).
  virtual void counts_to_host() {}
  Tensor found_inf_;
  Tensor counts_;                  // float32 [2 * parameters]; undefined: not seeded
  std::vector<uint8_t> count_at_;  // which element of pair i is current
};

// Note [one options struct]: every optimizer takes the one OptimizerOptions and reads the
// settings its row of optimizer_table() lists (optim/make_optimizer.h); its constructor is the one
// place that checks them. `minitrain train`'s TrainConfig derives from it, so the settings table's
// rows point into it and a flag's value reaches the optimizer with no second holder and no
// field-by-field copy (Note [one home per setting] in train/settings.h). Its defaults are those
// of make_optimizer and of `minitrain train`; SGDOptions, AdamOptions and RMSpropOptions are the
// same struct with torch's defaults of each optimizer.
struct OptimizerOptions {
  double lr = 3e-3;        ///< the base rate, which a schedule scales (set_lr_factor)
  double momentum = 0.0;   ///< sgd, rmsprop
  double dampening = 0.0;  ///< sgd
  bool nesterov = false;   ///< sgd
  /// sgd, adam, rmsprop: L2 added to the gradient; adamw: decoupled decay. Not set: the
  /// optimizer's own default (0; adamw 0.01), decided by its constructor.
  std::optional<double> weight_decay;
  double beta1 = 0.9, beta2 = 0.999;  ///< adam, adamw
  double eps = 1e-8;                  ///< adam, adamw, rmsprop
  bool amsgrad = false;               ///< adam, adamw
  double alpha = 0.99;                ///< rmsprop: smoothing constant of the squared gradients
  bool centered = false;              ///< rmsprop
};

/// torch.optim.SGD's defaults (lr 0.01 as minitrain's SGD has always had; weight_decay 0).
struct SGDOptions : OptimizerOptions {
  SGDOptions() {
    lr = 0.01;
    weight_decay = 0.0;
  }
};

/// torch.optim.SGD. With g = grad + weight_decay * p:
///   momentum == 0: p -= lr * g
///   else: buf = g at the first step, else buf = momentum * buf + (1 - dampening) * g;
///         p -= lr * (nesterov ? g + momentum * buf : buf)
/// ValueError (naming the value) for lr, momentum or weight_decay < 0 or non-finite, dampening
/// outside [0, 1], and for nesterov without momentum > 0 and dampening == 0 (torch's rule).
/// step() checks every gradient against its value (shape, dtype, device) before changing any.
/// The current rate is lr() (set_lr_factor, set_lr); options().lr is the base rate it was built
/// (or loaded) with.
class SGD final : public Optimizer {
 public:
  SGD(NamedParameters params, OptimizerOptions options);
  static std::vector<OptimizerInfo> rows();  ///< "sgd" (Note [one row per optimizer])
  void step() override;
  std::string name() const override { return "sgd"; }
  double base_lr() const noexcept override { return options_.lr; }
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override;
  std::map<std::string, std::string> state_scalars() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& scalars) override;
  const OptimizerOptions& options() const noexcept { return options_; }
  bool supports_capturable() const override { return true; }
  void prepare_step() override;
  void queue_step() override;

 private:
  void plan_step();  // checks, counts, state; fills groups_ and group_args_
  void counts_to_host() override;
  void seed_counts_once();        // skipping: the device's counts from the buffers that exist
  OptimizerOptions options_;      // weight_decay set (the constructor resolves it)
  std::vector<Tensor> momentum_;  // one per parameter, undefined until the first step
  std::vector<std::vector<std::size_t>> groups_;
  std::vector<SGDStepArgs> group_args_;
};

/// torch.optim.Adam's defaults (lr 1e-3, weight_decay 0).
struct AdamOptions : OptimizerOptions {
  AdamOptions() {
    lr = 1e-3;
    weight_decay = 0.0;
  }
};

/// torch.optim.Adam (decoupled = false) and torch.optim.AdamW (decoupled = true). At step t:
///   Adam:  g = grad + weight_decay * p          AdamW: p *= 1 - lr * weight_decay; g = grad
///   m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
///   v_hat = amsgrad ? (v_max = max(v_max, v)) : v
///   p -= (lr / (1 - beta1^t)) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps)
/// ValueError for lr < 0, eps < 0, betas outside [0, 1), weight_decay < 0, non-finite values.
/// Each parameter counts its own t (torch's state['step']): one skipped for lack of a gradient
/// does not advance its bias corrections.
class Adam final : public Optimizer {
 public:
  /// weight_decay not set: 0, or torch AdamW's 0.01 when decoupled.
  Adam(NamedParameters params, OptimizerOptions options, bool decoupled_weight_decay = false);
  static std::vector<OptimizerInfo> rows();  ///< "adam" and "adamw"
  void step() override;
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  double base_lr() const noexcept override { return options_.lr; }
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override;
  std::map<std::string, std::string> state_scalars() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& scalars) override;
  const OptimizerOptions& options() const noexcept { return options_; }
  bool supports_capturable() const override { return true; }
  void prepare_step() override;
  void queue_step() override;

 private:
  void plan_step();       // checks, counts, state; fills groups_ and group_args_
  void step_skippable();  // Note [skip on the device]
  // One multi-tensor launch (or a few) for groups_[g].
  void step_group(std::size_t g, const void* coeffs_on_device, const SkipOnDevice* skip);
  void counts_to_host() override;
  std::vector<int64_t> steps_taken() const;  // param_steps_, or the device's counts
  OptimizerOptions options_;                 // weight_decay set (the constructor resolves it)
  bool decoupled_;
  void ensure_bias_table();  // skipping: bias_table_ covers every parameter's count
  Tensor bias_table_;  // skipping: {1 - beta1^t, 1 - beta2^t} for t = 1.. on the flag's device
  std::vector<std::size_t> lr_offsets_;  // capturable and skipping: each group's rate (double)
  std::vector<Tensor> exp_avg_, exp_avg_sq_, max_exp_avg_sq_;
  std::vector<int64_t> param_steps_;  // torch's per-parameter state['step'] (bias corrections)
  std::vector<std::vector<std::size_t>> groups_;
  std::vector<AdamStepArgs> group_args_;
};

/// AdamW's defaults differ from Adam's only in weight_decay (0.01).
inline AdamOptions adamw_defaults() {
  AdamOptions o;
  o.weight_decay = 0.01;
  return o;
}

/// torch.optim.RMSprop's defaults (lr 0.01, weight_decay 0).
struct RMSpropOptions : OptimizerOptions {
  RMSpropOptions() {
    lr = 0.01;
    weight_decay = 0.0;
  }
};

/// torch.optim.RMSprop. With g = grad + weight_decay * p:
///   square_avg = alpha square_avg + (1 - alpha) g^2
///   centered: grad_avg = lerp(grad_avg, g, 1 - alpha); avg = sqrt(square_avg - grad_avg^2) + eps
///   else:     avg = sqrt(square_avg) + eps                       (eps after the square root)
///   momentum > 0: buf = momentum buf + g / avg; p -= lr buf      else p -= lr g / avg
/// State (square_avg, grad_avg when centered, momentum_buffer when momentum > 0) starts at zero
/// at a parameter's first step, as torch's. ValueError (naming the value) for lr, eps, momentum or
/// weight_decay < 0, alpha < 0 (torch's checks), and non-finite values.
class RMSprop final : public Optimizer {
 public:
  RMSprop(NamedParameters params, OptimizerOptions options);
  static std::vector<OptimizerInfo> rows();  ///< "rmsprop"
  void step() override;
  std::string name() const override { return "rmsprop"; }
  double base_lr() const noexcept override { return options_.lr; }
  /// "<param>.square_avg", "<param>.grad_avg" (centered), "<param>.momentum_buffer" (momentum).
  std::vector<std::pair<std::string, Tensor>> state_tensors() const override;
  std::map<std::string, std::string> state_scalars() const override;
  void load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                  const std::map<std::string, std::string>& scalars) override;
  const OptimizerOptions& options() const noexcept { return options_; }
  bool supports_capturable() const override { return true; }
  void prepare_step() override;
  void queue_step() override;

 private:
  void plan_step();           // checks, counts, state; fills stepped_
  OptimizerOptions options_;  // weight_decay set (the constructor resolves it)
  std::vector<Tensor> square_avg_, grad_avg_, momentum_;  // undefined until the first step
  std::vector<std::size_t> stepped_;
};

}  // namespace minitrain
