// The loss table: one entry per name, each making its Loss, and the settings' rows. MSE and
// cross_entropy live in their own files; the pointwise losses' rows come from
// MT_POINTWISE_LOSSES (kernels/loss/loss_math.h), the settings' from MT_LOSS_SETTINGS
// (nn/loss.h).

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
  const char* option;  ///< the LossOptions member
  const char* flag;
  bool (*given)(const LossOptions& o, const LossOptions& d);
  double (*value)(const LossOptions& o);
};

double as_number(double v) { return v; }
double as_number(bool v) { return v ? 1.0 : 0.0; }
double as_number(int64_t v) { return double(v); }
double as_number(const std::vector<double>&) { return 0.0; }

const SettingInfo kSettings[] = {
#define MT_LOSS_SETTING_INFO(Setting, member, flag)                                  \
  {S::Setting, #member, flag, [](auto& o, auto& d) { return o.member != d.member; }, \
   [](const LossOptions& o) { return as_number(o.member); }},
    MT_LOSS_SETTINGS(MT_LOSS_SETTING_INFO)
#undef MT_LOSS_SETTING_INFO
};

const SettingInfo& setting_info(LossSetting s) {
  for (const SettingInfo& i : kSettings)
    if (i.setting == s) return i;
  MT_THROW(Error, "loss setting ", int(s), " has no row in MT_LOSS_SETTINGS");
}

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
  // one row per pointwise loss, from its row of MT_POINTWISE_LOSSES (kernels/loss/loss_math.h)
#define MT_POINTWISE_LOSS_ROW(Kind, name, TorchClass, Math, setting) \
  {#name, TargetKind::Values, make<TorchClass>, loss_settings_named(#setting)},
      MT_POINTWISE_LOSSES(MT_POINTWISE_LOSS_ROW)
#undef MT_POINTWISE_LOSS_ROW
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

const char* loss_setting_flag(LossSetting s) { return setting_info(s).flag; }

const char* loss_setting_option(LossSetting s) { return setting_info(s).option; }

double loss_setting_value(const LossOptions& o, LossSetting s) { return setting_info(s).value(o); }

std::vector<LossSetting> loss_settings_named(const std::string& option) {
  for (const SettingInfo& i : kSettings)
    if (option == i.option) return {i.setting};
  MT_CHECK(option == "none", "no loss setting is named '", option,
           "' (MT_POINTWISE_LOSSES's setting column names a member of MT_LOSS_SETTINGS, or none)");
  return {};
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
