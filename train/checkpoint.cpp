// Checkpoints as one safetensors file: "model.*" and "optim.*" tensors, the position in metadata.

#include "train/checkpoint.h"

#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/safetensors.h"
#include "core/strings.h"
#include "core/version.h"
#include "nn/state_dict.h"

namespace minitrain {
namespace {

constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimPrefix = "optim.";

int64_t int_field(const std::map<std::string, std::string>& meta, const std::string& key,
                  const std::string& path) {
  const auto it = meta.find(key);
  if (it == meta.end())
    MT_THROW(IoError, "checkpoint '", path, "' has no '", key,
             "' in its metadata: not a minitrain checkpoint (or a damaged one)");
  try {
    std::size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  MT_THROW(IoError, "checkpoint '", path, "': metadata '", key, "' is '", it->second,
           "', not a non-negative integer");
}

// A field later versions added: `fallback` when the checkpoint predates it.
int64_t int_field_or(const std::map<std::string, std::string>& meta, const std::string& key,
                     int64_t fallback, const std::string& path) {
  return meta.count(key) != 0 ? int_field(meta, key, path) : fallback;
}

}  // namespace

std::string checkpoint_path(const std::string& dir) {
  if (dir.empty() || dir.back() == '/') return dir + "checkpoint.safetensors";
  return dir + "/checkpoint.safetensors";
}

void save_checkpoint(const std::string& path, Module& model, const Optimizer& optimizer,
                     const CheckpointPosition& position,
                     const std::map<std::string, std::string>& extra) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (auto& [name, t] : state_dict(model)) tensors.emplace_back(kModelPrefix + name, std::move(t));
  for (auto& [name, t] : optimizer.state_tensors())
    tensors.emplace_back(kOptimPrefix + name, std::move(t));

  std::map<std::string, std::string> meta = extra;
  meta["minitrain.checkpoint"] = "1";
  meta["minitrain_version"] = MINITRAIN_VERSION;  // the writer's
  meta["step"] = std::to_string(position.step);
  meta["batches_seen"] = std::to_string(position.batches_seen);
  meta["epoch"] = std::to_string(position.epoch);
  meta["batch_index"] = std::to_string(position.batch_index);
  meta["rng_seed"] = std::to_string(position.rng_seed);
  meta["rng_offset"] = std::to_string(position.rng_offset);
  meta["world_size"] = std::to_string(position.world_size);
  meta["global_batch"] = std::to_string(position.global_batch);
  meta["samples_seen"] = std::to_string(position.samples_seen);
  meta["epoch_samples"] = std::to_string(position.epoch_samples);
  meta["optimizer"] = optimizer.name();
  for (const auto& [key, value] : optimizer.state_scalars()) meta[kOptimPrefix + key] = value;
  write_safetensors(path, tensors, meta);
}

std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path) {
  return read_safetensors(path).metadata;
}

CheckpointPosition load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer) {
  SafetensorsFile file = read_safetensors(path);
  const auto& meta = file.metadata;
  if (meta.count("minitrain.checkpoint") == 0)
    MT_THROW(IoError, "'", path,
             "' is not a minitrain checkpoint (no 'minitrain.checkpoint' in its metadata); "
             "to start from plain weights use --init");
  const auto opt = meta.find("optimizer");
  if (opt != meta.end() && opt->second != optimizer.name())
    MT_THROW(ValueError, "checkpoint '", path, "' was written by optimizer ", opt->second,
             ", but this run uses ", optimizer.name(), "; resume with --optimizer ", opt->second);

  CheckpointPosition pos;
  pos.step = int_field(meta, "step", path);
  pos.batches_seen = int_field(meta, "batches_seen", path);
  pos.epoch = int_field(meta, "epoch", path);
  pos.batch_index = int_field(meta, "batch_index", path);
  pos.rng_seed = static_cast<uint64_t>(int_field(meta, "rng_seed", path));
  pos.rng_offset = static_cast<uint64_t>(int_field(meta, "rng_offset", path));
  pos.world_size = int_field_or(meta, "world_size", 1, path);
  pos.global_batch = int_field_or(meta, "global_batch", 0, path);
  pos.samples_seen = int_field_or(meta, "samples_seen", 0, path);
  pos.epoch_samples = int_field_or(meta, "epoch_samples", 0, path);

  std::vector<std::pair<std::string, Tensor>> model_tensors, optim_tensors;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModelPrefix))
      model_tensors.emplace_back(name.substr(6), std::move(t));
    else if (starts_with(name, kOptimPrefix))
      optim_tensors.emplace_back(name.substr(6), std::move(t));
    else
      MT_THROW(IoError, "checkpoint '", path, "' holds tensor '", name,
               "', neither model.* nor optim.*: not a minitrain checkpoint");
  }
  std::map<std::string, std::string> scalars;
  for (const auto& [key, value] : meta)
    if (starts_with(key, kOptimPrefix)) scalars[key.substr(6)] = value;

  // Both loads validate before they change anything; if the optimizer's fails after the model's
  // succeeded, put the model back so a failed resume leaves both as they were.
  const auto previous = state_dict(model);
  try {
    load_state_dict(model, model_tensors);
  } catch (const Error& e) {
    MT_THROW(ShapeError, "checkpoint '", path, "' does not fit the model: ", e.what());
  }
  try {
    optimizer.load_state(optim_tensors, scalars);
  } catch (const Error& e) {
    load_state_dict(model, previous);
    MT_THROW(ValueError, "checkpoint '", path, "': optimizer state does not fit: ", e.what());
  }
  return pos;
}

}  // namespace minitrain
