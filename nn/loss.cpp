// The loss table: one entry per name, each making its Loss. Each loss lives in its own file;
// this one only maps names to them.

#include "nn/loss.h"

#include "core/error.h"
#include "core/strings.h"
#include "nn/cross_entropy_loss.h"
#include "nn/mse_loss.h"
#include "nn/pointwise_loss.h"

namespace minitrain {

Tensor Loss::forward_backward(const Tensor& pred, const Tensor& target, Tensor& grad_pred) {
  Tensor loss = forward(pred, target);
  grad_pred = backward();
  return loss;
}

namespace {

using S = LossSetting;

// The entry for a Loss class constructed from the options (its constructor checks them).
template <typename L>
std::unique_ptr<Loss> make(const LossOptions& o) {
  return std::make_unique<L>(o);
}

struct SettingInfo {
  LossSetting setting;
  const char* flag;
  bool (*given)(const LossOptions& o, const LossOptions& d);
};

const SettingInfo kSettings[] = {
    {S::ClassWeights, "class-weights",
     [](auto& o, auto& d) { return o.class_weights != d.class_weights; }},
    {S::LabelSmoothing, "label-smoothing",
     [](auto& o, auto& d) { return o.label_smoothing != d.label_smoothing; }},
    {S::IgnoreIndex, "ignore-index",
     [](auto& o, auto& d) { return o.ignore_index != d.ignore_index; }},
    {S::PosWeight, "pos-weight", [](auto& o, auto& d) { return o.pos_weight != d.pos_weight; }},
    {S::Beta, "smooth-l1-beta", [](auto& o, auto& d) { return o.beta != d.beta; }},
    {S::Delta, "huber-delta", [](auto& o, auto& d) { return o.delta != d.delta; }},
    {S::LogTarget, "kl-log-target", [](auto& o, auto& d) { return o.log_target != d.log_target; }},
};

const LossInfo& find_loss(const std::string& name) {
  for (const LossInfo& e : loss_table())
    if (name == e.name) return e;
  MT_THROW(ValueError, "unknown loss '", name, "'; valid names: ", join(loss_names(), ", "));
}

bool takes(const LossInfo& l, LossSetting s) {
  for (LossSetting t : l.settings)
    if (t == s) return true;
  return false;
}

}  // namespace

const std::vector<LossInfo>& loss_table() {
  static const std::vector<LossInfo> table = {
      {"mse", TargetKind::Values, make<MSELoss>, {}},
      {"l1", TargetKind::Values, make<L1Loss>, {}},
      {"smooth_l1", TargetKind::Values, make<SmoothL1Loss>, {S::Beta}},
      {"huber", TargetKind::Values, make<HuberLoss>, {S::Delta}},
      {"bce_with_logits", TargetKind::Values, make<BCEWithLogitsLoss>, {S::PosWeight}},
      {"kl_div", TargetKind::Values, make<KLDivLoss>, {S::LogTarget}},
      {"cross_entropy",
       TargetKind::ClassIndices,
       make<CrossEntropyLoss>,
       {S::ClassWeights, S::LabelSmoothing, S::IgnoreIndex}},
  };
  return table;
}

const std::vector<std::string>& loss_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const LossInfo& e : loss_table()) v.emplace_back(e.name);
    return v;
  }();
  return names;
}

TargetKind loss_target_kind(const std::string& name) { return find_loss(name).kind; }

const char* loss_setting_flag(LossSetting s) {
  for (const SettingInfo& i : kSettings)
    if (i.setting == s) return i.flag;
  return "?";
}

std::string losses_taking(LossSetting s) {
  std::vector<std::string> names;
  for (const LossInfo& l : loss_table())
    if (takes(l, s)) names.push_back(l.name);
  return join(names, ", ");
}

std::vector<LossSetting> given_loss_settings(const LossOptions& o) {
  const LossOptions d;
  std::vector<LossSetting> given;
  for (const SettingInfo& i : kSettings)
    if (i.given(o, d)) given.push_back(i.setting);
  return given;
}

void check_loss_settings_apply(const std::string& name, const std::vector<LossSetting>& given) {
  for (const LossInfo& l : loss_table()) {
    if (name != l.name) continue;
    for (LossSetting s : given)
      if (!takes(l, s))
        MT_THROW(ValueError, "--", loss_setting_flag(s), " applies to --loss ", losses_taking(s),
                 ", not to --loss ", name);
  }
}

std::unique_ptr<Loss> make_loss(const LossOptions& options) {
  return find_loss(options.name).make(options);
}

}  // namespace minitrain
