// Builds an optimizer by name from command-line style settings.

#include "optim/make_optimizer.h"

#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace minitrain {

namespace {

using S = OptimizerSetting;

// Each setting's flag and whether a config gives it (away from the default).
struct SettingInfo {
  OptimizerSetting setting;
  const char* flag;
  bool (*given)(const OptimizerConfig& c, const OptimizerConfig& d);
};
const SettingInfo kSettings[] = {
    {S::Momentum, "momentum", [](auto& c, auto& d) { return c.momentum != d.momentum; }},
    {S::Dampening, "dampening", [](auto& c, auto& d) { return c.dampening != d.dampening; }},
    {S::Nesterov, "nesterov", [](auto& c, auto& d) { return c.nesterov != d.nesterov; }},
    {S::Betas, "betas", [](auto& c, auto& d) { return c.beta1 != d.beta1 || c.beta2 != d.beta2; }},
    {S::Eps, "eps", [](auto& c, auto& d) { return c.eps != d.eps; }},
    {S::Amsgrad, "amsgrad", [](auto& c, auto& d) { return c.amsgrad != d.amsgrad; }},
    {S::Alpha, "alpha", [](auto& c, auto& d) { return c.alpha != d.alpha; }},
    {S::Centered, "centered", [](auto& c, auto& d) { return c.centered != d.centered; }},
};

const OptimizerInfo* find_optimizer(const std::string& name) {
  for (const OptimizerInfo& o : optimizer_table())
    if (name == o.name) return &o;
  return nullptr;
}

bool takes(const OptimizerInfo& o, OptimizerSetting s) {
  for (OptimizerSetting t : o.settings)
    if (t == s) return true;
  return false;
}

}  // namespace

const std::vector<OptimizerInfo>& optimizer_table() {
  // Each class's rows, from its own file (Note [one row per optimizer] in optim/optimizer.h), in
  // MT_OPTIMIZERS's order.
  static const std::vector<OptimizerInfo> table = [] {
    std::vector<OptimizerInfo> t;
#define MT_OPTIMIZER_ROWS(Class) \
  for (OptimizerInfo & row : Class::rows()) t.push_back(std::move(row));
    MT_OPTIMIZERS(MT_OPTIMIZER_ROWS)
#undef MT_OPTIMIZER_ROWS
    return t;
  }();
  return table;
}

std::vector<std::string> optimizer_names() {
  std::vector<std::string> names;
  for (const OptimizerInfo& o : optimizer_table()) names.push_back(o.name);
  return names;
}

const char* optimizer_setting_flag(OptimizerSetting s) {
  for (const SettingInfo& i : kSettings)
    if (i.setting == s) return i.flag;
  return "?";
}

std::string optimizers_taking(OptimizerSetting s) {
  std::vector<std::string> names;
  for (const OptimizerInfo& o : optimizer_table())
    if (takes(o, s)) names.push_back(o.name);
  return join(names, ", ");
}

std::vector<OptimizerSetting> given_settings(const OptimizerConfig& c) {
  const OptimizerConfig d;
  std::vector<OptimizerSetting> given;
  for (const SettingInfo& i : kSettings)
    if (i.given(c, d)) given.push_back(i.setting);
  return given;
}

void check_settings_apply(const std::string& name, const std::vector<OptimizerSetting>& given) {
  const OptimizerInfo* o = find_optimizer(name);
  if (o == nullptr) return;
  for (OptimizerSetting s : given)
    if (!takes(*o, s))
      MT_THROW(ValueError, "--", optimizer_setting_flag(s), " applies to --optimizer ",
               optimizers_taking(s), ", not to ", name);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, NamedParameters params) {
  const OptimizerInfo* o = find_optimizer(c.name);
  if (o == nullptr)
    MT_THROW(ValueError, "unknown optimizer '", c.name,
             "'; valid names: ", join(optimizer_names(), ", "));
  check_settings_apply(c.name, given_settings(c));
  return o->make(c, std::move(params));
}

}  // namespace minitrain
