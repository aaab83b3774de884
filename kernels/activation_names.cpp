// Activation names and torch reprs, all read from kActivations (kernels/activation.h).

#include "core/error.h"
#include "core/strings.h"
#include "kernels/activation.h"

namespace minitrain {
namespace {

const ActivationInfo* find_activation(Activation a) {
  for (const ActivationInfo& info : kActivations)
    if (info.kind == a) return &info;
  return nullptr;
}

}  // namespace

Activation parse_activation(const std::string& name) {
  for (const ActivationInfo& info : kActivations)
    if (name == info.name) return info.kind;
  MT_THROW(ValueError, "unknown activation '", name,
           "'; valid names: ", join(activation_names(), ", "));
}

const char* activation_name(Activation a) {
  const ActivationInfo* info = find_activation(a);
  return info != nullptr ? info->name : "unknown";
}

const char* activation_torch_repr(Activation a) {
  const ActivationInfo* info = find_activation(a);
  if (info == nullptr) MT_THROW(ValueError, "unknown activation ", static_cast<int>(a));
  return info->torch_repr;
}

std::vector<std::string> activation_names() {
  std::vector<std::string> names;
  for (const ActivationInfo& info : kActivations) names.push_back(info.name);
  return names;
}

}  // namespace minitrain
