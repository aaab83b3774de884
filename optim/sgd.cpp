// torch.optim.SGD over the fused kernels: one multi-tensor step per device and dtype
// (kernels/optim/multi_tensor_optim.h), the one-tensor kernel (kernels/optim/sgd_step.h) for a lone
// parameter.

#include <algorithm>
#include <utility>

#include "core/option_error.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/sgd_step.h"
#include "optim/detail.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"

namespace minitrain {

namespace {

const char* const kMomentumSlot = "momentum_buffer";

// torch's checks (torch/optim/sgd.py), plus dampening in [0, 1] and finite values.
OptimizerOptions validated_sgd_options(OptimizerOptions o) {
  o.weight_decay = o.weight_decay.value_or(0.0);
  using namespace optim_detail;
  check_non_negative("sgd", "lr", o.lr);
  check_non_negative("sgd", "momentum", o.momentum);
  check_in_range("sgd", "dampening", o.dampening, 0.0, 1.0, /*hi_inclusive=*/true);
  check_non_negative("sgd", "weight_decay", *o.weight_decay);
  if (o.nesterov && (o.momentum <= 0.0 || o.dampening != 0.0))
    throw OptionError(
        "sgd", "nesterov",
        ::minitrain::detail::concat("requires momentum > 0 and dampening = 0 (as torch.optim.SGD), "
                                    "got momentum = ",
                                    o.momentum, " and dampening = ", o.dampening));
  return o;
}

}  // namespace

std::vector<OptimizerInfo> SGD::rows() {
  using S = OptimizerSetting;
  auto make = [](const OptimizerConfig& c, NamedParameters params) -> std::unique_ptr<Optimizer> {
    return std::make_unique<SGD>(std::move(params), c);
  };
  return {{"sgd", make, {S::Momentum, S::Dampening, S::Nesterov}}};
}

SGD::SGD(NamedParameters params, OptimizerOptions options)
    : Optimizer(std::move(params)), options_(validated_sgd_options(std::move(options))) {
  set_lr_factor({});
  momentum_.resize(params_.size());
}

void SGD::plan_step() {
  // Check every operand first, so that a bad parameter leaves all of them unchanged.
  for (const auto& [name, p] : params_) {
    if (!p->grad.defined()) continue;
    const std::string op = "sgd: parameter '" + name + "'";
    check_compatible(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
    check_same_shape(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
  }
  ++steps_;
  const bool momentum = options_.momentum != 0.0;
  SGDStepArgs args;
  args.lr = lr_;
  args.momentum = options_.momentum;
  args.dampening = options_.dampening;
  args.weight_decay = *options_.weight_decay;
  args.nesterov = options_.nesterov;
  std::vector<std::size_t> stepped;
  std::vector<int64_t> first_step;  // the buffer's first step takes another kernel variant
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].second;
    if (!p.grad.defined()) continue;  // torch skips grad=None
    stepped.push_back(i);
    first_step.push_back(momentum && !momentum_[i].defined());
    if (first_step.back()) {
      // torch: buf = clone(g) at the parameter's first step; the kernel writes it in the pass.
      // Skipping on the device, that step may be skipped: zeros until one is taken.
      momentum_[i] = skipping() ? Tensor::zeros(p.value.shape(), p.value.dtype(), p.value.device())
                                : Tensor::empty(p.value.shape(), p.value.dtype(), p.value.device());
    }
  }
  // Skipping on the device, the device knows a buffer's first step (its count is 0).
  if (skipping()) first_step.assign(stepped.size(), 0);
  // Parameters on one device with one dtype take one multi-tensor step (one launch on a GPU for
  // up to 48 tensors); the arithmetic, and so the result, is that of one sgd_step per tensor.
  groups_ = optim_detail::group_for_multi_tensor(params_, stepped, first_step);
  group_args_.clear();
  for (const auto& group : groups_) {
    args.first_step =
        momentum &&
        first_step[std::find(stepped.begin(), stepped.end(), group.front()) - stepped.begin()] != 0;
    group_args_.push_back(args);
  }
}

void SGD::step() {
  if (capturable_) {
    prepare_step();
    queue_step();
    return;
  }
  if (skipping()) check_skip_device();
  if (skipping()) seed_counts_once();
  plan_step();
  const bool momentum = options_.momentum != 0.0;
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto& group = groups_[g];
    if (skipping()) {  // Note [skip on the device]: the multi-tensor kernel reads the flag
      std::vector<Tensor> values, grads, buffers;
      SkipOnDevice skip;
      skip.args.found_inf = found_inf_.data<float>();
      for (std::size_t i : group) {
        values.push_back(params_[i].second->value);
        grads.push_back(params_[i].second->grad);
        if (momentum) buffers.push_back(momentum_[i]);
        skip.counts.push_back(count_of(i));
      }
      sgd_step_multi(values, grads, buffers, group_args_[g], nullptr, &skip);
      for (std::size_t i : group) flip_count(i);
      continue;
    }
    if (group.size() == 1) {
      Parameter& p = *params_[group.front()].second;
      sgd_step(p.value, p.grad, momentum_[group.front()], group_args_[g]);
      continue;
    }
    std::vector<Tensor> values, grads, buffers;
    for (std::size_t i : group) {
      values.push_back(params_[i].second->value);
      grads.push_back(params_[i].second->grad);
      if (momentum) buffers.push_back(momentum_[i]);
    }
    sgd_step_multi(values, grads, buffers, group_args_[g]);
  }
}

void SGD::seed_counts_once() {
  if (counts_seeded()) return;
  std::vector<int64_t> taken;  // a buffer that exists has taken its first step
  for (const Tensor& b : momentum_) taken.push_back(b.defined() ? 1 : 0);
  seed_counts(taken);
}

// A buffer whose every step was skipped was never created, as in torch.
void SGD::counts_to_host() {
  const std::vector<int64_t> taken = read_counts();
  for (std::size_t i = 0; i < momentum_.size(); ++i)
    if (taken[i] == 0) momentum_[i] = Tensor();
}

// Note [capturable step] (optim/optimizer.h), as Adam::prepare_step.
// Skipping on the device too: Note [a captured skippable step] in optimizer.cpp.
void SGD::prepare_step() {
  if (!capturable_) Optimizer::prepare_step();
  plan_.clear();
  if (skipping()) {
    check_skip_device();
    seed_counts_once();
  }
  plan_step();
  plan_grouped_step(
      groups_,
      [&](std::size_t g, DType dtype, std::vector<unsigned char>& bytes) {
        return dispatch_float(dtype, [&](auto zero) {
          using T = decltype(zero);
          return optim_detail::append_scalars(bytes, sgd_coeffs<T>(group_args_[g]));
        });
      },
      [&](std::size_t g) -> int64_t { return group_args_[g].first_step ? 1 : 0; },
      [&](std::size_t i) {
        return std::vector<const Tensor*>{&params_[i].second->value, &params_[i].second->grad,
                                          &momentum_[i]};
      });
  if (skipping()) plan_skip();
}

void SGD::queue_step() {
  if (!capturable_) Optimizer::queue_step();
  MT_CHECK_AS(ValueError, !plan_.empty(), name(), ": queue_step without a prepare_step before it");
  const bool momentum = options_.momentum != 0.0;
  std::size_t at = 0;  // walks the plan: offset, first step, size, then the members
  for (std::size_t g = 0; g < groups_.size(); ++g) {
    const auto offset = static_cast<std::size_t>(plan_[at]);
    at += 3 + groups_[g].size() * 4;
    std::vector<Tensor> values, grads, buffers;
    for (std::size_t i : groups_[g]) {
      values.push_back(params_[i].second->value);
      grads.push_back(params_[i].second->grad);
      if (momentum) buffers.push_back(momentum_[i]);
    }
    // One parameter too takes the multi-tensor kernel: the bits are the one-tensor kernel's.
    if (!skipping()) {
      sgd_step_multi(values, grads, buffers, group_args_[g], scalars_at(offset));
      continue;
    }
    SkipOnDevice skip;
    skip.args.found_inf = found_inf_.data<float>();
    for (std::size_t i : groups_[g]) skip.counts.push_back(count_of(i));
    sgd_step_multi(values, grads, buffers, group_args_[g], scalars_at(offset), &skip);
    for (std::size_t i : groups_[g]) settle_count(i);
  }
}

std::vector<std::pair<std::string, Tensor>> SGD::state_tensors() const {
  std::vector<std::pair<std::string, Tensor>> out;
  // Skipping on the device, a buffer whose every step was skipped does not exist yet (torch).
  const std::vector<int64_t> taken =
      skipping() && counts_seeded() ? read_counts() : std::vector<int64_t>(params_.size(), 1);
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (momentum_[i].defined() && taken[i] > 0)
      out.emplace_back(params_[i].first + "." + kMomentumSlot,
                       optim_detail::host_copy(momentum_[i]));
  return out;
}

std::map<std::string, std::string> SGD::state_scalars() const {
  using namespace optim_detail;
  auto s = Optimizer::state_scalars();
  s["momentum"] = format_double(options_.momentum);
  s["dampening"] = format_double(options_.dampening);
  s["weight_decay"] = format_double(*options_.weight_decay);
  s["nesterov"] = format_bool(options_.nesterov);
  return s;
}

void SGD::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& scalars) {
  using namespace optim_detail;
  // Everything is read and checked into locals first; members change only at the end.
  const auto [steps, lr, initial_lr] = read_common_scalars(name(), scalars, lr_);
  OptimizerOptions o = options_;
  o.lr = initial_lr;
  double weight_decay = *o.weight_decay;
  read_double(name(), scalars, "momentum", &o.momentum);
  read_double(name(), scalars, "dampening", &o.dampening);
  read_double(name(), scalars, "weight_decay", &weight_decay);
  o.weight_decay = weight_decay;
  read_bool(name(), scalars, "nesterov", &o.nesterov);
  o = validated_sgd_options(o);

  std::vector<Tensor> buffers =
      std::move(read_state_slots(name(), tensors, params_, {kMomentumSlot}).front());

  options_ = o;
  lr_ = lr;
  steps_ = steps;
  momentum_ = std::move(buffers);
  plan_.clear();
  counts_ = Tensor();  // skipping on the device: seeded again from the buffers loaded
}

}  // namespace minitrain
