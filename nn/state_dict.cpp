// state_dict / load_state_dict and their .safetensors forms. Loading is all-or-nothing: every
// key, shape and conversion is checked and prepared before the first parameter is written.

#include "nn/state_dict.h"

#include <cmath>
#include <set>
#include <sstream>

#include "core/finite.h"
#include "core/safetensors.h"
#include "core/version.h"
#include "kernels/cast.h"

namespace minitrain {

namespace {
// At most kShownKeys names, each cut short: a file of 200,000 tensors gives a message, not a flood.
constexpr std::size_t kShownKeys = 10;

std::string shown_list(const std::vector<std::string>& names, bool quote) {
  const char* q = quote ? "\"" : "";
  std::string s;
  for (std::size_t i = 0; i < names.size() && i < kShownKeys; ++i)
    s += (i ? ", " : "") + (q + excerpt(names[i]) + q);
  if (names.size() > kShownKeys) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

std::string quoted_list(const std::vector<std::string>& names) { return shown_list(names, true); }
}  // namespace

std::vector<std::pair<std::string, Tensor>> state_dict(Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto& [name, p] : m.named_parameters()) {
    const Tensor& v = p->value;
    out.emplace_back(name, v.device().is_cpu() ? v.clone() : v.to(Device::cpu()));
  }
  return out;
}

void load_state_dict(Module& m, const std::vector<std::pair<std::string, Tensor>>& tensors) {
  NamedParameters params = m.named_parameters();
  std::map<std::string, const Tensor*> given;
  std::vector<std::string> duplicate, undefined;
  for (const auto& [name, t] : tensors) {
    if (!given.emplace(name, &t).second) duplicate.push_back(name);
    if (!t.defined()) undefined.push_back(name);
  }
  std::set<std::string> expected;
  std::vector<std::string> missing, unexpected, misshapen;
  for (const auto& [name, p] : params) {
    expected.insert(name);
    auto it = given.find(name);
    if (it == given.end()) {
      missing.push_back(name);
    } else if (it->second->defined() && it->second->shape() != p->value.shape()) {
      std::ostringstream os;
      os << '"' << name << "\" is " << it->second->shape() << " but the model has "
         << p->value.shape();
      misshapen.push_back(os.str());
    }
  }
  for (const auto& [name, t] : tensors)
    if (!expected.count(name)) unexpected.push_back(name);

  std::ostringstream problems;
  const char* sep = "";
  auto report = [&](const char* what, const std::vector<std::string>& keys, bool quote) {
    if (keys.empty()) return;
    problems << sep << what << ' ';
    problems << shown_list(keys, quote);
    sep = "; ";
  };
  report("missing keys", missing, true);
  report("unexpected keys", unexpected, true);
  report("duplicate keys", duplicate, true);
  report("undefined tensors", undefined, true);
  const bool key_errors =
      !missing.empty() || !unexpected.empty() || !duplicate.empty() || !undefined.empty();
  report("shape mismatch:", misshapen, false);
  if (key_errors) {
    std::vector<std::string> names;
    for (const auto& [name, p] : params) names.push_back(name);
    MT_THROW(ValueError, "load_state_dict: ", problems.str(), " (the model's keys are ",
             quoted_list(names), ")");
  }
  if (!misshapen.empty()) MT_THROW(ShapeError, "load_state_dict: ", problems.str());

  // Convert everything first (the step that can fail), then write.
  std::vector<Tensor> sources;
  sources.reserve(params.size());
  for (const auto& [name, p] : params) {
    const Tensor& src = *given.at(name);
    sources.push_back(src.dtype() == p->value.dtype() ? src : cast(src, p->value.dtype()));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    Tensor& dst = params[i].second->value;
    if (sources[i].raw_data() == dst.raw_data() && sources[i].device() == dst.device()) continue;
    dst.copy_(sources[i]);
  }
}

void save_weights(const std::string& path, Module& m,
                  const std::map<std::string, std::string>& metadata, std::optional<DType> dtype) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, p] : m.named_parameters()) {
    if (!dtype || *dtype == p->value.dtype()) {
      tensors.emplace_back(name, p->value);
      continue;
    }
    Tensor narrow = cast(p->value, *dtype);
    // float16 ends at 65504: a larger weight would be written as inf without a word (bfloat16
    // has float32's range, so only float16 can overflow). Nothing is written then.
    const int64_t bad = first_non_finite(narrow);
    if (bad >= 0) {
      const double v = p->value.to(Device::cpu()).to_double_vector()[static_cast<std::size_t>(bad)];
      MT_CHECK_AS(ValueError, !std::isfinite(v), "'", path, "' as ", dtype_name(*dtype),
                  ": tensor '", name, "' holds ", v, " at ", unravel_index(bad, p->value.shape()),
                  ", beyond float16's range (65504), which would be saved as ",
                  v > 0 ? "inf" : "-inf",
                  "; save it in fp32 or bf16 (float32's range), or keep the weights smaller");
    }
    tensors.emplace_back(name, std::move(narrow));
  }
  std::map<std::string, std::string> meta = {{"minitrain_version", MINITRAIN_VERSION}};
  for (const auto& [k, v] : metadata) meta[k] = v;  // the caller's may override
  write_safetensors(path, tensors, meta);
}

void load_weights(const std::string& path, Module& m) {
  const SafetensorsFile file = read_safetensors(path, Device::cpu());
  // A NaN weight would surface at step 1 as a NaN loss blamed on the learning rate.
  for (const auto& [name, t] : file.tensors) {
    const int64_t bad = first_non_finite(t);
    MT_CHECK_AS(ValueError, bad < 0, "'", path, "': tensor '", name, "' holds ",
                non_finite_name(t, bad), " at ", unravel_index(bad, t.shape()),
                "; weights must be finite");
  }
  try {
    load_state_dict(m, file.tensors);
  } catch (const ShapeError& e) {
    MT_THROW(ShapeError, "'", path, "': ", e.what());
  } catch (const ValueError& e) {
    MT_THROW(ValueError, "'", path, "': ", e.what());
  }
}

}  // namespace minitrain
