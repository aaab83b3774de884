// Rebuilding a model from what its weights file says of itself (infer/trained_model.h).

#include "infer/trained_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/generator.h"
#include "core/safetensors.h"
#include "core/strings.h"
#include "kernels/activation.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "train/flag_context.h"
#include "train/loss_metadata.h"

namespace minitrain {
namespace {

// The tensors of a model by state_dict names, and the file's metadata: a weights file as train
// --save (or PyTorch) writes it, or a checkpoint, whose "model." tensors are the model's.
struct TrainedWeights {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::map<std::string, std::string> metadata;
};

TrainedWeights read_trained_weights(const std::string& path) {
  SafetensorsFile file;
  with_flag_context("--weights", [&] { file = read_safetensors(path); });
  TrainedWeights w;
  w.metadata = std::move(file.metadata);
  if (w.metadata.count("minitrain.checkpoint") == 0) {
    w.tensors = std::move(file.tensors);
    return w;
  }
  const std::string prefix = "model.";
  for (auto& [name, t] : file.tensors)
    if (starts_with(name, prefix)) w.tensors.emplace_back(name.substr(prefix.size()), std::move(t));
  return w;
}

// make_mlp(sizes)'s parameters are Linear layers at even indices: "2i.weight" [s(i+1), s(i)] and
// "2i.bias" [s(i+1)]. Each must be in `tensors` with that shape; ShapeError after `source` names
// the missing keys and the shape mismatches, as load_state_dict would (which then checks the
// rest, on a model that the file's tensors fit).
void check_tensors_fit_mlp(const std::vector<std::pair<std::string, Tensor>>& tensors,
                           const std::vector<int64_t>& sizes, const std::string& source) {
  std::map<std::string, Shape> shapes;
  for (const auto& [name, t] : tensors) shapes[name] = t.shape();
  std::vector<std::string> missing, misshapen;
  for (std::size_t i = 0; i + 1 < sizes.size(); ++i) {
    const std::string layer = std::to_string(2 * i);
    const std::pair<std::string, Shape> wanted[] = {
        {layer + ".weight", Shape{sizes[i + 1], sizes[i]}}, {layer + ".bias", Shape{sizes[i + 1]}}};
    for (const auto& [name, shape] : wanted) {
      const auto it = shapes.find(name);
      if (it == shapes.end()) {
        missing.push_back('"' + name + '"');
      } else if (it->second != shape) {
        std::ostringstream os;
        os << '"' << name << "\" is " << it->second << " but the model has " << shape;
        misshapen.push_back(os.str());
      }
    }
  }
  if (missing.empty() && misshapen.empty()) return;
  std::string problems;
  if (!missing.empty()) problems = "missing keys " + join(missing, ", ");
  if (!misshapen.empty())
    problems +=
        (problems.empty() ? "" : "; ") + std::string("shape mismatch: ") + join(misshapen, ", ");
  MT_THROW(ShapeError, source, ": ", problems);
}

// What the weights say `key` is, or the flag's value where they say nothing; a flag that says
// otherwise than the weights is an error (a wrong --activation would give wrong outputs quietly).
// `same` compares two values as what they mean (a model by its sizes, an activation by its kind).
template <typename Same>
std::string settle(const TrainedWeights& w, const std::string& weights_path, const char* key,
                   const char* flag, const std::string& flag_value, Same same) {
  const auto it = w.metadata.find(key);
  if (it == w.metadata.end()) return flag_value;
  MT_CHECK_AS(ValueError, flag_value.empty() || same(flag_value, it->second), flag, " ", flag_value,
              " contradicts the weights: ", weights_path, " was trained as ", it->second,
              " (its metadata '", key, "'); leave ", flag,
              " out, or give the weights of the model you mean");
  return it->second;
}

// The metadata's 'target_columns', 'feature_columns', 'ignore_columns' or 'classes': a JSON list
// of names
// (train/run_training.cpp writes them).
std::vector<std::string> metadata_names(const std::string& text, const std::string& path,
                                        const char* key) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const bool ok = j.is_array() && std::all_of(j.begin(), j.end(), [](const nlohmann::json& v) {
                    return v.is_string();
                  });
  MT_CHECK_AS(IoError, ok, path, ": metadata '", key, "' is '", excerpt(text, 80),
              "', not a JSON list of names");
  return j.get<std::vector<std::string>>();
}

// The metadata's 'standardize_mean' or 'standardize_scale': a JSON list of one float32 number per
// input (scales > 0), which train --standardize writes.
std::vector<float> metadata_numbers(const std::string& text, const std::string& path,
                                    const char* key, int64_t inputs, bool positive) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  bool ok = j.is_array() && static_cast<int64_t>(j.size()) == inputs;
  std::vector<float> v;
  for (std::size_t i = 0; ok && i < j.size(); ++i) {
    ok = j[i].is_number();
    const double d = ok ? j[i].get<double>() : 0.0;
    ok = ok && std::isfinite(d) && std::fabs(d) <= std::numeric_limits<float>::max() &&
         (!positive || static_cast<float>(d) > 0);
    v.push_back(static_cast<float>(d));
  }
  MT_CHECK_AS(IoError, ok, path, ": metadata '", key, "' is '", excerpt(text, 80),
              "', not a JSON list of ", inputs, " finite", positive ? " positive" : "",
              " numbers (one per input of the model)");
  return v;
}

}  // namespace

TrainedModel load_trained_model(const std::string& weights, const std::string& model_flag,
                                const std::string& activation_flag, Device device) {
  const TrainedWeights w = read_trained_weights(weights);
  TrainedModel t;
  t.spec = settle(w, weights, "model", "--model", model_flag, [](const auto& a, const auto& b) {
    return parse_mlp_spec(a) == parse_mlp_spec(b);
  });
  MT_CHECK_AS(ValueError, !t.spec.empty(), "--weights ", weights,
              " does not say which model it holds (no 'model' in its metadata, as in a file "
              "made by PyTorch): give --model mlp:IN,...,OUT");
  t.sizes = parse_mlp_spec(t.spec);
  t.activation = settle(
      w, weights, "activation", "--activation", activation_flag,
      [](const auto& a, const auto& b) { return parse_activation(a) == parse_activation(b); });
  MT_CHECK_AS(ValueError, !t.activation.empty(), "--weights ", weights,
              " does not say which activation its model uses (no 'activation' in its metadata): "
              "give --activation (",
              join(activation_names(), ", "), ")");
  if (const auto it = w.metadata.find("target_columns"); it != w.metadata.end())
    t.target_columns = metadata_names(it->second, weights, "target_columns");
  if (const auto it = w.metadata.find("feature_columns"); it != w.metadata.end())
    t.feature_columns = metadata_names(it->second, weights, "feature_columns");
  if (const auto it = w.metadata.find("ignore_columns"); it != w.metadata.end())
    t.ignore_columns = metadata_names(it->second, weights, "ignore_columns");
  if (const auto it = w.metadata.find("classes"); it != w.metadata.end())
    t.classes = metadata_names(it->second, weights, "classes");
  if (const auto it = w.metadata.find("loss"); it != w.metadata.end()) {
    t.loss.name = it->second;
    with_flag_context("--weights " + weights + " (metadata 'loss')",
                      [&] { loss_target_kind(t.loss.name); });  // a name this build knows
  }
  if (const auto it = w.metadata.find("loss_settings"); it != w.metadata.end()) {
    read_loss_settings_metadata(it->second, weights, t.loss);
    // Settings the loss takes, in range: the checks of training's own flags.
    with_flag_context("--weights " + weights + " (metadata 'loss_settings')", [&] {
      check_loss_settings_apply(t.loss.name, given_loss_settings(t.loss));
      make_loss(t.loss);
    });
  }
  MT_CHECK_AS(IoError,
              t.classes.empty() || static_cast<int64_t>(t.classes.size()) == t.sizes.back(),
              weights, ": metadata 'classes' names ", t.classes.size(), " classes but the model ",
              t.spec, " has ", t.sizes.back(), " outputs");
  MT_CHECK_AS(IoError,
              t.feature_columns.empty() ||
                  static_cast<int64_t>(t.feature_columns.size()) == t.sizes.front(),
              weights, ": metadata 'feature_columns' names ", t.feature_columns.size(),
              " columns but the model ", t.spec, " takes ", t.sizes.front(), " inputs");
  const auto mean = w.metadata.find("standardize_mean");
  const auto scale = w.metadata.find("standardize_scale");
  MT_CHECK_AS(IoError, (mean == w.metadata.end()) == (scale == w.metadata.end()), weights,
              ": its metadata has '",
              mean == w.metadata.end() ? "standardize_scale" : "standardize_mean", "' without '",
              mean == w.metadata.end() ? "standardize_mean" : "standardize_scale",
              "'; train --standardize writes both");
  if (mean != w.metadata.end()) {
    t.scaler.mean =
        metadata_numbers(mean->second, weights, "standardize_mean", t.sizes.front(), false);
    t.scaler.scale =
        metadata_numbers(scale->second, weights, "standardize_scale", t.sizes.front(), true);
  }
  // Tensors that do not fit the model: say where the model came from, the metadata field or the
  // flag, since that (or the file) is what to fix.
  const std::string source = w.metadata.count("model")
                                 ? "--weights " + weights + ": the model " + t.spec +
                                       " that its metadata 'model' names does not fit its tensors"
                                 : "--model " + t.spec + " does not fit the tensors of " + weights;
  // Checked before the model is made: a 584-byte file whose metadata claims a 560 MB model once
  // had that model allocated (and initialised) before its tensors were looked at.
  check_tensors_fit_mlp(w.tensors, t.sizes, source);
  Generator gen(0);  // every parameter is then overwritten by the weights file
  t.model = make_mlp(t.sizes, parse_activation(t.activation), gen, device);
  with_flag_context(source, [&] { load_state_dict(*t.model, w.tensors); });
  return t;
}

Tensor TrainedModel::model_input(const Tensor& x) const {
  return scaler.empty() ? x : standardize(x.to(Device::cpu()), scaler);
}

bool TrainedModel::classifier() const {
  return loss_target_kind(loss.name) == TargetKind::ClassIndices;
}

TrainedModel::OutputMap TrainedModel::output_map() const {
  if (loss.name == "bce_with_logits") return OutputMap::Sigmoid;
  if (loss.name == "poisson_nll" && loss.log_input) return OutputMap::Exp;
  if (loss.name == "kl_div" && !loss.log_target) return OutputMap::Exp;
  return OutputMap::None;
}

Tensor TrainedModel::target_values(const Tensor& outputs) const {
  const OutputMap map = output_map();
  if (map == OutputMap::None) return outputs.to(Device::cpu());
  MT_CHECK_AS(DTypeError, outputs.dtype() == DType::Float32,
              "TrainedModel::target_values: the outputs are ", outputs.dtype(), ", not float32");
  Tensor v = outputs.to(Device::cpu()).clone();
  float* x = v.data<float>();
  // In double, rounded once to float; predict and evaluate both read these values.
  for (int64_t i = 0; i < v.numel(); ++i)
    x[i] = static_cast<float>(map == OutputMap::Exp ? std::exp(double(x[i]))
                                                    : 1.0 / (1.0 + std::exp(-double(x[i]))));
  return v;
}

}  // namespace minitrain
