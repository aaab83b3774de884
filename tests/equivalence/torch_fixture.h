#pragma once
// Reading the PyTorch reference runs of tests/fixtures/torch_reference (written by
// make_torch_reference.py): the file of a case, its metadata, the optimizer it was trained with and
// its tensors by prefix ("init.", "final.").

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "optim/make_optimizer.h"
#include "tests/support/test_util.h"

namespace minitrain::testing {

inline std::string torch_fixture(const std::string& name) {
  return ::minitrain::testing::test_data_dir() + "/torch_reference/" + name;
}

inline const std::string& meta(const SafetensorsFile& f, const std::string& key) {
  auto it = f.metadata.find(key);
  MT_CHECK(it != f.metadata.end(), "fixture metadata has no \"", key, "\"");
  return it->second;
}

inline double meta_double(const SafetensorsFile& f, const std::string& key) {
  return std::stod(meta(f, key));
}

inline bool meta_bool(const SafetensorsFile& f, const std::string& key) {
  return meta(f, key) == "true";
}

/// The optimizer the fixture was trained with, as `minitrain train` would configure it.
inline OptimizerConfig optimizer_config(const SafetensorsFile& f) {
  OptimizerConfig c;
  c.name = meta(f, "optimizer");
  c.lr = meta_double(f, "lr");
  c.weight_decay = meta_double(f, "weight_decay");
  if (c.name == "sgd") {
    c.momentum = meta_double(f, "momentum");
    c.dampening = meta_double(f, "dampening");
    c.nesterov = meta_bool(f, "nesterov");
  } else if (c.name == "rmsprop") {
    c.alpha = meta_double(f, "alpha");
    c.eps = meta_double(f, "eps");
    c.momentum = meta_double(f, "momentum");
    c.centered = meta_bool(f, "centered");
  } else {
    c.beta1 = meta_double(f, "beta1");
    c.beta2 = meta_double(f, "beta2");
    c.eps = meta_double(f, "eps");
    c.amsgrad = meta_bool(f, "amsgrad");
  }
  return c;
}

/// The tensors whose names start with `prefix`, with the prefix removed ("init.0.weight" ->
/// "0.weight").
inline std::vector<std::pair<std::string, Tensor>> with_prefix(const SafetensorsFile& f,
                                                               const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, t] : f.tensors)
    if (name.compare(0, prefix.size(), prefix) == 0)
      out.emplace_back(name.substr(prefix.size()), t);
  return out;
}

}  // namespace minitrain::testing
