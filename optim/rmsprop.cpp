// torch.optim.RMSprop over the fused one-tensor step of its row (RmspropStep in
// kernels/optim/optimizer_math.h, run by kernels/optim/optimizer_step.h): one pass per parameter
// over its value, gradient and state. Its row of optimizer_table() is rows() below.

#include <utility>

#include "kernels/check.h"
#include "kernels/optim/optimizer_step.h"
#include "optim/detail.h"
#include "optim/make_optimizer.h"
#include "optim/optimizer.h"

namespace minitrain {

namespace {

const char* const kSquareAvg = "square_avg";
const char* const kGradAvg = "grad_avg";
const char* const kMomentumBuffer = "momentum_buffer";

// torch's checks (torch/optim/rmsprop.py: lr, eps, momentum, weight_decay and alpha >= 0), plus
// finite values.
OptimizerOptions validated_rmsprop_options(OptimizerOptions o) {
  o.weight_decay = o.weight_decay.value_or(0.0);
  using namespace optim_detail;
  check_non_negative("rmsprop", "lr", o.lr);
  check_non_negative("rmsprop", "alpha", o.alpha);
  check_non_negative("rmsprop", "eps", o.eps);
  check_non_negative("rmsprop", "weight_decay", *o.weight_decay);
  check_non_negative("rmsprop", "momentum", o.momentum);
  return o;
}

RMSpropStepArgs step_args(const OptimizerOptions& o, double lr) {
  RMSpropStepArgs a;
  a.lr = lr;
  a.alpha = o.alpha;
  a.eps = o.eps;
  a.weight_decay = *o.weight_decay;
  a.momentum = o.momentum;
  a.centered = o.centered;
  return a;
}

}  // namespace

std::vector<OptimizerInfo> RMSprop::rows() {
  using S = OptimizerSetting;
  auto make = [](const OptimizerConfig& c, NamedParameters params) -> std::unique_ptr<Optimizer> {
    return std::make_unique<RMSprop>(std::move(params), c);
  };
  return {{"rmsprop", make, {S::Momentum, S::Eps, S::Alpha, S::Centered}}};
}

RMSprop::RMSprop(NamedParameters params, OptimizerOptions options)
    : Optimizer(std::move(params)), options_(validated_rmsprop_options(std::move(options))) {
  set_lr_factor({});
  square_avg_.resize(params_.size());
  grad_avg_.resize(params_.size());
  momentum_.resize(params_.size());
}

void RMSprop::plan_step() {
  // Check every operand first, so that a bad parameter leaves all of them unchanged.
  for (const auto& [pname, p] : params_) {
    if (!p->grad.defined()) continue;
    const std::string op = "rmsprop: parameter '" + pname + "'";
    check_compatible(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
    check_same_shape(op.c_str(), {{"value", p->value}, {"grad", p->grad}});
  }
  ++steps_;
  stepped_.clear();
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].second;
    if (!p.grad.defined()) continue;  // torch skips grad=None
    const Tensor& v = p.value;
    // torch's lazy state init: zeros at the parameter's first step
    if (!square_avg_[i].defined()) square_avg_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
    if (options_.centered && !grad_avg_[i].defined())
      grad_avg_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
    if (options_.momentum > 0.0 && !momentum_[i].defined())
      momentum_[i] = Tensor::zeros(v.shape(), v.dtype(), v.device());
    stepped_.push_back(i);
  }
}

void RMSprop::step() {
  if (capturable_) {
    prepare_step();
    queue_step();
    return;
  }
  if (skipping()) check_skip_device();
  plan_step();
  const RMSpropStepArgs args = step_args(options_, lr_);
  // Note [skip on the device]: RMSprop counts no steps, so the flag is all the kernel needs.
  const Tensor* found_inf = skipping() ? &found_inf_ : nullptr;
  for (std::size_t i : stepped_) {
    Parameter& p = *params_[i].second;
    optimizer_step<RmspropStep>(p.value, p.grad, {&square_avg_[i], &grad_avg_[i], &momentum_[i]},
                                args, nullptr, found_inf);
  }
}

// Note [capturable step] (optim/optimizer.h): one step's factors are the same for every
// parameter of a dtype, so the buffer holds them once per dtype (float32 at 0, float64 after).
void RMSprop::prepare_step() {
  using optim_detail::plan_address;
  if (!capturable_) Optimizer::prepare_step();
  plan_.clear();
  if (skipping()) check_skip_device();
  plan_step();
  const RMSpropStepArgs args = step_args(options_, lr_);
  std::vector<unsigned char> bytes;
  const std::size_t f32 = optim_detail::append_scalars(bytes, RmspropStep::coeffs<float>(args));
  const std::size_t f64 = optim_detail::append_scalars(bytes, RmspropStep::coeffs<double>(args));
  std::vector<int64_t> plan{static_cast<int64_t>(f32), static_cast<int64_t>(f64)};
  Device device = Device::cpu();
  for (std::size_t k = 0; k < stepped_.size(); ++k) {
    const std::size_t i = stepped_[k];
    const Tensor& v = params_[i].second->value;
    MT_CHECK_AS(ValueError, k == 0 || v.device() == device, name(),
                ": a capturable step needs every parameter on one device, but '", params_[i].first,
                "' is on ", v.device(), " and others on ", device);
    device = v.device();
    plan.push_back(static_cast<int64_t>(i));
    for (const Tensor* t : {&params_[i].second->value, &params_[i].second->grad, &square_avg_[i],
                            &grad_avg_[i], &momentum_[i]})
      plan.push_back(plan_address(*t));
  }
  if (!stepped_.empty()) store_scalars(bytes, device);
  plan.push_back(plan_address(scalars_));
  plan.push_back(plan_address(found_inf_));  // skipping on the device: the flag's address
  plan_ = std::move(plan);
}

void RMSprop::queue_step() {
  if (!capturable_) Optimizer::queue_step();
  MT_CHECK_AS(ValueError, !plan_.empty(), name(), ": queue_step without a prepare_step before it");
  const RMSpropStepArgs args = step_args(options_, lr_);  // the variant; the factors are read
  for (std::size_t i : stepped_) {
    Parameter& p = *params_[i].second;
    const auto offset =
        static_cast<std::size_t>(p.value.dtype() == DType::Float64 ? plan_[1] : plan_[0]);
    // Note [skip on the device]: RMSprop counts no steps; the flag sits at a fixed address.
    optimizer_step<RmspropStep>(p.value, p.grad, {&square_avg_[i], &grad_avg_[i], &momentum_[i]},
                                args, scalars_at(offset), skipping() ? &found_inf_ : nullptr);
  }
}

std::vector<std::pair<std::string, Tensor>> RMSprop::state_tensors() const {
  using optim_detail::host_copy;
  std::vector<std::pair<std::string, Tensor>> out;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string& pname = params_[i].first;
    if (square_avg_[i].defined())
      out.emplace_back(pname + "." + kSquareAvg, host_copy(square_avg_[i]));
    if (grad_avg_[i].defined()) out.emplace_back(pname + "." + kGradAvg, host_copy(grad_avg_[i]));
    if (momentum_[i].defined())
      out.emplace_back(pname + "." + kMomentumBuffer, host_copy(momentum_[i]));
  }
  return out;
}

std::map<std::string, std::string> RMSprop::state_scalars() const {
  using namespace optim_detail;
  auto s = Optimizer::state_scalars();
  s["alpha"] = format_double(options_.alpha);
  s["eps"] = format_double(options_.eps);
  s["weight_decay"] = format_double(*options_.weight_decay);
  s["momentum"] = format_double(options_.momentum);
  s["centered"] = format_bool(options_.centered);
  return s;
}

void RMSprop::load_state(const std::vector<std::pair<std::string, Tensor>>& tensors,
                         const std::map<std::string, std::string>& scalars) {
  using namespace optim_detail;
  const std::string who = name();
  // Everything is read and checked into locals first; members change only at the end.
  const auto [steps, lr, initial_lr] = read_common_scalars(who, scalars, lr_);
  OptimizerOptions o = options_;
  o.lr = initial_lr;
  double weight_decay = *o.weight_decay;
  read_double(who, scalars, "alpha", &o.alpha);
  read_double(who, scalars, "eps", &o.eps);
  read_double(who, scalars, "weight_decay", &weight_decay);
  o.weight_decay = weight_decay;
  read_double(who, scalars, "momentum", &o.momentum);
  read_bool(who, scalars, "centered", &o.centered);
  o = validated_rmsprop_options(o);

  const std::size_t n = params_.size();
  std::vector<std::vector<Tensor>> slots =
      read_state_slots(who, tensors, params_, {kSquareAvg, kGradAvg, kMomentumBuffer});
  // A stepped parameter has square_avg, and grad_avg / momentum_buffer exactly when the settings
  // make them: a state saved with other settings is refused, not silently continued.
  for (std::size_t i = 0; i < n; ++i) {
    const std::string& pname = params_[i].first;
    const bool sq = slots[0][i].defined(), ga = slots[1][i].defined(), buf = slots[2][i].defined();
    if (!sq && !ga && !buf) continue;
    if (!sq)
      MT_THROW(ValueError, who, ": optimizer state for '", pname, "' has ",
               ga ? kGradAvg : kMomentumBuffer, " but no ", kSquareAvg);
    if (ga != o.centered)
      MT_THROW(ValueError, who, ": centered is ", o.centered ? "on" : "off",
               " but the optimizer state ", ga ? "has" : "has no", " '", pname, ".", kGradAvg,
               "' (was it saved with centered ", ga ? "on" : "off", "?)");
    if (buf != (o.momentum > 0.0))
      MT_THROW(ValueError, who, ": momentum is ", o.momentum, " but the optimizer state ",
               buf ? "has" : "has no", " '", pname, ".", kMomentumBuffer, "' (was it saved with ",
               buf ? "momentum > 0" : "momentum 0", "?)");
  }

  options_ = o;
  lr_ = lr;
  steps_ = steps;
  square_avg_ = std::move(slots[0]);
  grad_avg_ = std::move(slots[1]);
  momentum_ = std::move(slots[2]);
  plan_.clear();
}

}  // namespace minitrain
