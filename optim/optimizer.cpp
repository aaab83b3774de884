// The Optimizer base class and the helpers shared by SGD and Adam (optim/detail.h).

#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <locale>
#include <set>
#include <sstream>

#include "core/option_error.h"
#include "core/stream.h"
#include "core/strings.h"
#include "kernels/fill.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "optim/detail.h"

namespace minitrain {

namespace optim_detail {

void check_non_negative(const std::string& who, const char* what, double value) {
  if (!(std::isfinite(value) && value >= 0.0))
    throw OptionError(who, what, "must be finite and >= 0, got " + number_text(value));
}

void check_in_range(const std::string& who, const char* what, double value, double lo, double hi,
                    bool hi_inclusive) {
  const bool ok = std::isfinite(value) && value >= lo && (hi_inclusive ? value <= hi : value < hi);
  if (!ok)
    throw OptionError(
        who, what,
        ::minitrain::detail::concat("must be in [", lo, ", ", hi, hi_inclusive ? "]" : ")",
                                    ", got ", number_text(value)));
}

std::string format_double(double v) {
  std::ostringstream os;
  os.imbue(std::locale::classic());
  os.precision(17);
  os << v;
  return os.str();
}

std::string format_bool(bool v) { return v ? "true" : "false"; }

std::string format_int(int64_t v) { return std::to_string(v); }

namespace {
template <typename T>
bool parse_exact(const std::string& text, T* out) {
  std::istringstream is(text);
  is.imbue(std::locale::classic());
  T v{};
  is >> v;
  if (is.fail() || !is.eof()) return false;
  *out = v;
  return true;
}
}  // namespace

bool read_double(const std::string& who, const std::map<std::string, std::string>& scalars,
                 const std::string& key, double* out) {
  auto it = scalars.find(key);
  if (it == scalars.end()) return false;
  if (!parse_exact(it->second, out))
    MT_THROW(ValueError, who, ": optimizer state scalar '", key, "' = '", it->second,
             "' is not a number");
  return true;
}

bool read_bool(const std::string& who, const std::map<std::string, std::string>& scalars,
               const std::string& key, bool* out) {
  auto it = scalars.find(key);
  if (it == scalars.end()) return false;
  if (it->second == "true" || it->second == "1") {
    *out = true;
  } else if (it->second == "false" || it->second == "0") {
    *out = false;
  } else {
    MT_THROW(ValueError, who, ": optimizer state scalar '", key, "' = '", it->second,
             "' is not true or false");
  }
  return true;
}

bool read_int(const std::string& who, const std::map<std::string, std::string>& scalars,
              const std::string& key, int64_t* out) {
  auto it = scalars.find(key);
  if (it == scalars.end()) return false;
  long long v = 0;
  if (!parse_exact(it->second, &v))
    MT_THROW(ValueError, who, ": optimizer state scalar '", key, "' = '", it->second,
             "' is not an integer");
  *out = static_cast<int64_t>(v);
  return true;
}

CommonScalars read_common_scalars(const std::string& kind,
                                  const std::map<std::string, std::string>& scalars,
                                  double current_lr) {
  auto it = scalars.find("optimizer");
  if (it == scalars.end())
    MT_THROW(ValueError, kind,
             ": optimizer state has no 'optimizer' scalar; was it saved by "
             "Optimizer::state_scalars()?");
  if (it->second != kind)
    MT_THROW(ValueError, kind, ": optimizer state was saved by '", it->second,
             "' and cannot be loaded into '", kind, "'; use --optimizer ", it->second,
             " or start without the state");
  int64_t steps = 0;
  if (!read_int(kind, scalars, "steps", &steps))
    MT_THROW(ValueError, kind, ": optimizer state has no 'steps' scalar");
  if (steps < 0) MT_THROW(ValueError, kind, ": optimizer state 'steps' = ", steps, " is negative");
  double lr = current_lr;
  if (read_double(kind, scalars, "lr", &lr)) check_non_negative(kind, "lr", lr);
  double initial_lr = lr;  // a state saved before "initial_lr": its rate was its base
  if (read_double(kind, scalars, "initial_lr", &initial_lr))
    check_non_negative(kind, "initial_lr", initial_lr);
  return {steps, lr, initial_lr};
}

std::pair<std::size_t, std::size_t> match_state_name(const std::string& who, const std::string& key,
                                                     const NamedParameters& params,
                                                     const std::vector<std::string>& slots) {
  for (std::size_t s = 0; s < slots.size(); ++s) {
    const std::string suffix = "." + slots[s];
    if (key.size() <= suffix.size() || !ends_with(key, suffix)) continue;
    const std::string param = key.substr(0, key.size() - suffix.size());
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].first == param) return {i, s};
    MT_THROW(ValueError, who, ": optimizer state '", key, "' names parameter '", param,
             "', which this model does not have (", params.size(), " parameters",
             params.empty() ? std::string() : ", the first '" + params.front().first + "'", ")");
  }
  std::string expected;
  for (std::size_t s = 0; s < slots.size(); ++s) expected += (s ? ", " : "") + slots[s];
  MT_THROW(ValueError, who, ": unknown optimizer state '", key,
           "'; expected '<parameter>.<slot>' with slot one of: ", expected);
}

Tensor load_state_tensor(const std::string& who, const std::string& key, const Tensor& src,
                         const Tensor& param) {
  MT_CHECK_AS(ValueError, src.defined(), who, ": optimizer state '", key, "' is undefined");
  if (src.shape() != param.shape())
    MT_THROW(ShapeError, who, ": optimizer state '", key, "' has shape ", src.shape(),
             " but the parameter has shape ", param.shape());
  if (src.dtype() != param.dtype())
    MT_THROW(DTypeError, who, ": optimizer state '", key, "' is ", src.dtype(),
             " but the parameter is ", param.dtype());
  Tensor dst = Tensor::empty(param.shape(), param.dtype(), param.device());
  dst.copy_(src);
  return dst;
}

std::vector<std::vector<Tensor>> read_state_slots(
    const std::string& who, const std::vector<std::pair<std::string, Tensor>>& tensors,
    const NamedParameters& params, const std::vector<std::string>& slots) {
  std::vector<std::vector<Tensor>> out(slots.size(), std::vector<Tensor>(params.size()));
  for (const auto& [key, t] : tensors) {
    const auto [i, s] = match_state_name(who, key, params, slots);
    MT_CHECK_AS(ValueError, !out[s][i].defined(), who, ": optimizer state '", key,
                "' appears twice");
    out[s][i] = load_state_tensor(who, key, t, params[i].second->value);
  }
  return out;
}

Tensor host_copy(const Tensor& t) { return t.device().is_cpu() ? t.clone() : t.to(Device::cpu()); }

std::vector<std::vector<std::size_t>> group_for_multi_tensor(
    const NamedParameters& params, const std::vector<std::size_t>& indices,
    const std::vector<int64_t>& keys) {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<int64_t> group_keys;  // the key of groups[g]
  for (std::size_t j = 0; j < indices.size(); ++j) {
    const Tensor& v = params[indices[j]].second->value;
    std::size_t g = 0;
    for (; g < groups.size(); ++g) {
      const Tensor& w = params[groups[g].front()].second->value;
      if (w.device() == v.device() && w.dtype() == v.dtype() && group_keys[g] == keys[j]) break;
    }
    if (g == groups.size()) {
      groups.emplace_back();
      group_keys.push_back(keys[j]);
    }
    groups[g].push_back(indices[j]);
  }
  return groups;
}

}  // namespace optim_detail

// lr is checked once, by each optimizer's constructor (its validated_<name>_options(), which names
// it).
Optimizer::Optimizer(NamedParameters params) : params_(std::move(params)) {
  std::set<std::string> names;
  std::set<const Parameter*> seen;
  for (const auto& [name, p] : params_) {
    MT_CHECK_AS(ValueError, p != nullptr, "optimizer: parameter '", name, "' is a null pointer");
    MT_CHECK_AS(ValueError, p->value.defined(), "optimizer: parameter '", name,
                "' has no value tensor");
    MT_CHECK_AS(ValueError, names.insert(name).second, "optimizer: parameter name '", name,
                "' appears twice; state names '<parameter>.<slot>' must be unique");
    MT_CHECK_AS(ValueError, seen.insert(p).second, "optimizer: parameter '", name,
                "' is the same Parameter as an earlier one (torch: some parameters appear in "
                "more than one parameter group)");
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  std::vector<Tensor> grads;
  for (auto& [name, p] : params_) {
    if (set_to_none)
      release_grad(*p);
    else if (p->grad.defined())
      grads.push_back(p->grad);
  }
  zero_all(grads);  // one parallel region for all of them
}

void Optimizer::set_lr(double lr) {
  optim_detail::check_non_negative(name(), "lr", lr);
  lr_ = lr;
}

void Optimizer::set_capturable(bool on) {
  MT_CHECK_AS(ValueError, !on || supports_capturable(), name(),
              ": this optimizer has no capturable step (a CUDA graph would replay its first "
              "step's learning rate); use sgd, adam or adamw, or run without the graph");
  capturable_ = on;
  plan_.clear();
}

void Optimizer::set_found_inf(const Tensor& flag) {
  if (!flag.defined()) {
    if (skipping() && counts_seeded()) counts_to_host();
    found_inf_ = Tensor();
    counts_ = Tensor();
    return;
  }
  MT_CHECK_AS(ValueError, flag.dtype() == DType::Float32 && flag.numel() == 1, name(),
              ": the inf flag must be one float32 value, got ", flag.dtype(), " ", flag.shape());
  if (skipping() && found_inf_.device() != flag.device() && counts_seeded()) counts_to_host();
  if (!skipping() || found_inf_.device() != flag.device()) counts_ = Tensor();
  found_inf_ = flag;
}

void Optimizer::seed_counts(const std::vector<int64_t>& host) {
  std::vector<float> pairs;
  for (int64_t c : host) {
    pairs.push_back(static_cast<float>(c));
    pairs.push_back(static_cast<float>(c));
  }
  counts_ =
      Tensor::from_vector(pairs, Shape{static_cast<int64_t>(pairs.size())}, found_inf_.device());
  count_at_.assign(host.size(), 0);
}

float* Optimizer::count_of(std::size_t i) { return counts_.data<float>() + 2 * i + count_at_[i]; }

// Note [a captured skippable step]: flipping which element of a count pair is current changes the
// addresses the next launch reads and writes, and a CUDA graph replays the captured ones. So a
// capturable step that skips on the flag keeps the current element where it is: the kernel reads
// it and writes the other (no block reads what another writes, as before), and a 4-byte
// device-to-device copy queued after the launch brings the new count back. The counts, the flag
// and Adam's bias table then sit at fixed addresses, which the plan lists; the rate (Adam's only
// step-dependent input besides the count) is read from the factor buffer (SkipArgs::lr_on_device).
void Optimizer::settle_count(std::size_t i) {
  float* current = count_of(i);
  const Device device = found_inf_.device();
  copy_bytes_async(current, device, other_count(current), device, sizeof(float),
                   current_stream(device));
}

void Optimizer::plan_skip(const Tensor& extra) {
  using optim_detail::plan_address;
  plan_.push_back(plan_address(found_inf_));
  for (std::size_t i = 0; i < count_at_.size(); ++i)
    plan_.push_back(static_cast<int64_t>(reinterpret_cast<intptr_t>(count_of(i))));
  plan_.push_back(plan_address(extra));
}

std::vector<int64_t> Optimizer::read_counts() const {
  const Tensor host = counts_.to(Device::cpu());
  std::vector<int64_t> out;
  for (std::size_t i = 0; i < count_at_.size(); ++i)
    out.push_back(static_cast<int64_t>(host.data<float>()[2 * i + count_at_[i]]));
  return out;
}

void Optimizer::check_skip_device() const {
  for (const auto& [pname, p] : params_)
    MT_CHECK_AS(ValueError, !p->grad.defined() || p->value.device() == found_inf_.device(), name(),
                ": skipping on the device's inf flag needs every parameter on its device ",
                found_inf_.device(), ", but '", pname, "' is on ", p->value.device());
}

void Optimizer::prepare_step() {
  MT_THROW(ValueError, name(), ": prepare_step needs a capturable optimizer (set_capturable)");
}

void Optimizer::queue_step() {
  MT_THROW(ValueError, name(), ": queue_step needs a capturable optimizer (set_capturable)");
}

void Optimizer::store_scalars(const std::vector<unsigned char>& bytes, Device device) {
  MT_CHECK_AS(ValueError, device.is_cuda(), name(),
              ": a capturable step keeps its factors on a CUDA device, but the parameters are on ",
              device, "; turn capturable off on the CPU");
  const auto doubles = static_cast<int64_t>((bytes.size() + 7) / 8);
  if (!scalars_.defined() || scalars_.device() != device || scalars_.nbytes() < bytes.size())
    scalars_ = Tensor::zeros({std::max<int64_t>(doubles, 32)}, DType::Float64, device);
  store_step_scalars(scalars_, bytes);
}

void Optimizer::plan_grouped_step(
    const std::vector<std::vector<std::size_t>>& groups,
    const std::function<std::size_t(std::size_t, DType, std::vector<unsigned char>&)>&
        append_factors,
    const std::function<int64_t(std::size_t)>& variant,
    const std::function<std::vector<const Tensor*>(std::size_t)>& members) {
  using optim_detail::plan_address;
  std::vector<unsigned char> bytes;
  std::vector<int64_t> plan;
  Device device = Device::cpu();
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const Tensor& first = params_[groups[g].front()].second->value;
    MT_CHECK_AS(ValueError, g == 0 || first.device() == device, name(),
                ": a capturable step needs every parameter on one device, but '",
                params_[groups[g].front()].first, "' is on ", first.device(), " and others on ",
                device);
    device = first.device();
    plan.push_back(static_cast<int64_t>(append_factors(g, first.dtype(), bytes)));
    plan.push_back(variant(g));
    plan.push_back(static_cast<int64_t>(groups[g].size()));
    for (std::size_t i : groups[g]) {
      plan.push_back(static_cast<int64_t>(i));
      for (const Tensor* t : members(i)) plan.push_back(plan_address(*t));
    }
  }
  if (!groups.empty()) store_scalars(bytes, device);
  plan.push_back(plan_address(scalars_));
  plan_ = std::move(plan);
}

const void* Optimizer::scalars_at(std::size_t offset) const {
  return static_cast<const unsigned char*>(scalars_.raw_data()) + offset;
}

std::map<std::string, std::string> Optimizer::state_scalars() const {
  return {{"optimizer", name()},
          {"steps", optim_detail::format_int(steps_)},
          {"lr", optim_detail::format_double(lr_)},
          {"initial_lr", optim_detail::format_double(base_lr())}};
}

}  // namespace minitrain
