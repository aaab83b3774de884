// torch.optim.Adam and AdamW over the fused kernels: one multi-tensor step per device, dtype and
// step count (kernels/optim/multi_tensor_optim.h), the one-tensor kernel
// (kernels/optim/adam_step.h) for a lone parameter. As in torch, each parameter counts its own
// steps (a parameter skipped for lack of a gradient does not advance its bias correction).

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/optim/adam_step.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "optim/detail.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"

namespace minitrain {

namespace {

const char* const kExpAvg = "exp_avg";
const char* const kExpAvgSq = "exp_avg_sq";
const char* const kMaxExpAvgSq = "max_exp_avg_sq";
const char* const kStep = "step";  // per-parameter step count, a scalar "<param>.step"

// torch's checks (torch/optim/adam.py), plus finite values.
OptimizerOptions validated_adam_options(OptimizerOptions o, bool decoupled) {
  o.weight_decay = o.weight_decay.value_or(decoupled ? adamw_defaults().weight_decay.value() : 0.0);
  using namespace optim_detail;
  const std::string who = decoupled ? "adamw" : "adam";
  check_non_negative(who, "lr", o.lr);
  check_non_negative(who, "eps", o.eps);
  check_in_range(who, "beta1", o.beta1, 0.0, 1.0, /*hi_inclusive=*/false);
  check_in_range(who, "beta2", o.beta2, 0.0, 1.0, /*hi_inclusive=*/false);
  check_non_negative(who, "weight_decay", *o.weight_decay);
  return o;
}

}  // namespace

std::vector<OptimizerInfo> Adam::rows() {
  using S = OptimizerSetting;
  auto adam = [](const OptimizerConfig& c, NamedParameters params) -> std::unique_ptr<Optimizer> {
    return std::make_unique<Adam>(std::move(params), c, /*decoupled_weight_decay=*/false);
  };
  auto adamw = [](const OptimizerConfig& c, NamedParameters params) -> std::unique_ptr<Optimizer> {
    return std::make_unique<Adam>(std::move(params), c, /*decoupled_weight_decay=*/true);
  };
  return {{"adam", adam, {S::Betas, S::Eps, S::Amsgrad}},
          {"adamw", adamw, {S::Betas, S::Eps, S::Amsgrad}}};
}

Adam::Adam(NamedParameters params, OptimizerOptions options, bool decoupled_weight_decay)
    : Optimizer(std::move(params)),
      options_(validated_adam_options(std::move(options), decoupled_weight_decay)),
      decoupled_(decoupled_weight_decay) {
  set_lr_factor({});
  exp_avg_.resize(params_.size());
  exp_avg_sq_.resize(params_.size());
  max_exp_avg_sq_.resize(params_.size());
  param_steps_.assign(params_.size(), 0);
}

void Adam::plan_step() {
  // Check every operand first, so that a bad parameter leaves all of them unchanged.
  for (const auto& [pname, p] : params_) {
    if (!p->grad.defined()) continue;
    const std::string op = name() + ": parameter '" + pname + "'";
    check_compatible(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
    check_same_shape(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
  }
  ++steps_;
  std::vector<std::size_t> stepped;
  std::vector<int64_t> t_of;  // each parameter's own step t: its bias corrections
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].second;
    if (!p.grad.defined()) continue;  // torch skips grad=None
    const Tensor& v = p.value;
    if (!exp_avg_[i].defined()) {  // torch's lazy state init: zeros at the first step
      exp_avg_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
      exp_avg_sq_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
      param_steps_[i] = 0;
    }
    if (options_.amsgrad && !max_exp_avg_sq_[i].defined())
      max_exp_avg_sq_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
    stepped.push_back(i);
    t_of.push_back(++param_steps_[i]);
  }
  // Parameters on one device with one dtype and one step count take one multi-tensor step (one
  // launch on a GPU for up to 30-36 tensors); the factors are computed once per group exactly as
  // per tensor, so the result is that of one adam_step per tensor, bit for bit. Skipping on the
  // device, each tensor's count is read there: the counts do not split the groups, and
  // param_steps_ counts the steps queued (an upper bound of those taken).
  if (skipping()) t_of.assign(stepped.size(), 0);
  groups_ = optim_detail::group_for_multi_tensor(params_, stepped, t_of);
  group_args_.clear();
  for (const auto& group : groups_)
    group_args_.push_back(adam_step_args(lr_, options_.beta1, options_.beta2, options_.eps,
                                         *options_.weight_decay, decoupled_, options_.amsgrad,
                                         param_steps_[group.front()]));
}

void Adam::step() {
  if (capturable_) {
    prepare_step();
    queue_step();
    return;
  }
  if (skipping()) {
    step_skippable();
    return;
  }
  plan_step();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    if (group.size() == 1) {
      const std::size_t i = group.front();
      Parameter& p = *params_[i].second;
      adam_step(p.value, p.grad, exp_avg_[i], exp_avg_sq_[i], max_exp_avg_sq_[i], group_args_[g]);
      continue;
    }
    step_group(g, nullptr, nullptr);
  }
}

// Note [skip on the device]: the counts start from the host's; the table of 1 - beta^t grows
// (doubling, so rarely) to cover the most steps a parameter can have taken; every group takes
// the multi-tensor kernel, which reads the flag, its tensors' counts and the table.
void Adam::step_skippable() {
  check_skip_device();
  if (!counts_seeded()) seed_counts(param_steps_);
  plan_step();
  ensure_bias_table();
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    SkipOnDevice skip;
    skip.args.found_inf = found_inf_.data<float>();
    skip.args.lr = lr_;
    skip.args.bias_table = bias_table_.data<double>();
    for (std::size_t i : groups_[g]) skip.counts.push_back(count_of(i));
    step_group(g, nullptr, &skip);
    for (std::size_t i : groups_[g]) flip_count(i);
  }
}

void Adam::ensure_bias_table() {
  int64_t most = 0;
  for (int64_t t : param_steps_) most = std::max(most, t);
  const int64_t have = bias_table_.defined() ? bias_table_.numel() / 2 : 0;
  if (most > have || bias_table_.device() != found_inf_.device()) {
    const int64_t size = std::max<int64_t>({64, 2 * have, most});
    std::vector<double> table;
    for (int64_t t = 1; t <= size; ++t) {
      // adam_step_args' arithmetic: 1 - beta ** t in double.
      table.push_back(1.0 - std::pow(options_.beta1, static_cast<double>(t)));
      table.push_back(1.0 - std::pow(options_.beta2, static_cast<double>(t)));
    }
    bias_table_ = Tensor::from_vector(table, Shape{2 * size}, found_inf_.device());
  }
}

void Adam::step_group(std::size_t g, const void* coeffs_on_device, const SkipOnDevice* skip) {
  std::vector<Tensor> values, grads, m, v, vmax;
  for (std::size_t i : groups_[g]) {
    values.push_back(params_[i].second->value);
    grads.push_back(params_[i].second->grad);
    m.push_back(exp_avg_[i]);
    v.push_back(exp_avg_sq_[i]);
    if (options_.amsgrad) vmax.push_back(max_exp_avg_sq_[i]);
  }
  adam_step_multi(values, grads, m, v, vmax, group_args_[g], coeffs_on_device, skip);
}

void Adam::counts_to_host() { param_steps_ = read_counts(); }

std::vector<int64_t> Adam::steps_taken() const {
  return skipping() && counts_seeded() ? read_counts() : param_steps_;
}

// Note [capturable step] (optim/optimizer.h): the factors of each group, rounded to its element
// type by adam_coeffs as a by-value launch rounds them, go to the device in one store; the plan
// names every address the launches will touch.
// Skipping on the device too (Note [a captured skippable step] in optimizer.cpp): each group's
// rate follows its factors, the bias table is grown here, and the plan lists the flag, the counts
// and the table.
void Adam::prepare_step() {
  if (!capturable_) Optimizer::prepare_step();
  plan_.clear();
  if (skipping()) {
    check_skip_device();
    if (!counts_seeded()) seed_counts(param_steps_);
  }
  plan_step();
  if (skipping()) ensure_bias_table();
  lr_offsets_.assign(groups_.size(), 0);
  plan_grouped_step(
      groups_,
      [&](std::size_t g, DType dtype, std::vector<unsigned char>& bytes) {
        const std::size_t at = dispatch_float(dtype, [&](auto zero) {
          using T = decltype(zero);
          return optim_detail::append_scalars(bytes, adam_coeffs<T>(group_args_[g]));
        });
        if (skipping()) lr_offsets_[g] = optim_detail::append_scalars(bytes, lr_);
        return at;
      },
      [&](std::size_t g) -> int64_t { return static_cast<int64_t>(group_args_[g].decay); },
      [&](std::size_t i) {
        return std::vector<const Tensor*>{&params_[i].second->value, &params_[i].second->grad,
                                          &exp_avg_[i], &exp_avg_sq_[i], &max_exp_avg_sq_[i]};
      });
  if (skipping()) plan_skip(bias_table_);
}

void Adam::queue_step() {
  if (!capturable_) Optimizer::queue_step();
  MT_CHECK_AS(ValueError, !plan_.empty(), name(), ": queue_step without a prepare_step before it");
  std::size_t at = 0;  // walks the plan: offset, decay, size, then the members
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto offset = static_cast<std::size_t>(plan_[at]);
    at += 3 + groups_[g].size() * 6;
    // One parameter too takes the multi-tensor kernel: the bits are the one-tensor kernel's.
    if (!skipping()) {
      step_group(g, scalars_at(offset), nullptr);
      continue;
    }
    SkipOnDevice skip;
    skip.args.found_inf = found_inf_.data<float>();
    skip.args.lr = lr_;
    skip.args.lr_on_device = static_cast<const double*>(scalars_at(lr_offsets_[g]));
    skip.args.bias_table = bias_table_.data<double>();
    for (std::size_t i : groups_[g]) skip.counts.push_back(count_of(i));
    step_group(g, scalars_at(offset), &skip);
    for (std::size_t i : groups_[g]) settle_count(i);
  }
}

std::vector<std::pair<std::string, Tensor>> Adam::state_tensors() const {
  using optim_detail::host_copy;
  std::vector<std::pair<std::string, Tensor>> out;
  // A parameter whose every step was skipped has no state, as in torch (its moments are zeros).
  const std::vector<int64_t> taken = steps_taken();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined() || taken[i] == 0) continue;
    const std::string& pname = params_[i].first;
    out.emplace_back(pname + "." + kExpAvg, host_copy(exp_avg_[i]));
    out.emplace_back(pname + "." + kExpAvgSq, host_copy(exp_avg_sq_[i]));
    if (max_exp_avg_sq_[i].defined())
      out.emplace_back(pname + "." + kMaxExpAvgSq, host_copy(max_exp_avg_sq_[i]));
  }
  return out;
}

std::map<std::string, std::string> Adam::state_scalars() const {
  using namespace optim_detail;
  auto s = Optimizer::state_scalars();
  s["beta1"] = format_double(options_.beta1);
  s["beta2"] = format_double(options_.beta2);
  s["eps"] = format_double(options_.eps);
  s["weight_decay"] = format_double(*options_.weight_decay);
  s["amsgrad"] = format_bool(options_.amsgrad);
  const std::vector<int64_t> taken = steps_taken();
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (exp_avg_[i].defined() && taken[i] > 0)
      s[params_[i].first + "." + kStep] = format_int(taken[i]);
  return s;
}

void Adam::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& scalars) {
  using namespace optim_detail;
  const std::string who = name();
  // Everything is read and checked into locals first; members change only at the end.
  const auto [steps, lr, initial_lr] = read_common_scalars(who, scalars, lr_);
  OptimizerOptions o = options_;
  o.lr = initial_lr;
  double weight_decay = *o.weight_decay;
  read_double(who, scalars, "beta1", &o.beta1);
  read_double(who, scalars, "beta2", &o.beta2);
  read_double(who, scalars, "eps", &o.eps);
  read_double(who, scalars, "weight_decay", &weight_decay);
  o.weight_decay = weight_decay;
  read_bool(who, scalars, "amsgrad", &o.amsgrad);
  o = validated_adam_options(o, decoupled_);

  const std::size_t n = params_.size();
  std::vector<std::vector<Tensor>> slots =
      read_state_slots(who, tensors, params_, {kExpAvg, kExpAvgSq, kMaxExpAvgSq});
  std::vector<int64_t> param_steps(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& pname = params_[i].first;
    const bool m = slots[0][i].defined(), v = slots[1][i].defined(), vmax = slots[2][i].defined();
    if (!m && !v && !vmax) continue;
    if (!m || !v)
      MT_THROW(ValueError, who, ": optimizer state for '", pname, "' has ", m ? kExpAvg : kExpAvgSq,
               " but not ", m ? kExpAvgSq : kExpAvg);
    if (o.amsgrad && !vmax)
      MT_THROW(ValueError, who, ": amsgrad is on but the optimizer state has no '", pname, ".",
               kMaxExpAvgSq, "' (was it saved without amsgrad?)");
    if (!o.amsgrad && vmax)
      MT_THROW(ValueError, who, ": the optimizer state has '", pname, ".", kMaxExpAvgSq,
               "' but amsgrad is off (was it saved with amsgrad?)");
    // Per-parameter steps; a state without them had every parameter step every time.
    int64_t t = steps;
    read_int(who, scalars, pname + "." + kStep, &t);
    if (t < 1)
      MT_THROW(ValueError, who, ": optimizer state scalar '", pname, ".", kStep, "' = ", t,
               " but a parameter with moments has taken at least one step");
    param_steps[i] = t;
  }

  options_ = o;
  lr_ = lr;
  steps_ = steps;
  exp_avg_ = std::move(slots[0]);
  exp_avg_sq_ = std::move(slots[1]);
  max_exp_avg_sq_ = std::move(slots[2]);
  param_steps_ = std::move(param_steps);
  plan_.clear();
  counts_ = Tensor();  // skipping on the device: seeded again from these at the next step
}

}  // namespace minitrain
