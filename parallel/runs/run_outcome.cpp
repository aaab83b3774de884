// One pass over a run's metrics log, keeping the running sums of the current epoch.

#include "parallel/runs/run_outcome.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

namespace minitrain {
namespace {

std::optional<double> number(const nlohmann::json& j, const char* key) {
  if (j.contains(key) && j[key].is_number()) return j[key].get<double>();
  return std::nullopt;
}

}  // namespace

RunOutcome read_run_outcome(const std::string& metrics_path) {
  RunOutcome o;
  std::ifstream in(metrics_path);
  double loss_sum = 0, loss_steps = 0, accuracy_sum = 0, accuracy_steps = 0;
  double cpu_seconds = 0, wall_seconds = 0, gpu_sum = 0, gpu_steps = 0;
  std::string line;
  while (std::getline(in, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    const int64_t epoch = j.value("epoch", int64_t{0});
    if (epoch != o.epoch) {
      o.epoch = epoch;
      loss_sum = loss_steps = accuracy_sum = accuracy_steps = 0;
    }
    const double steps = static_cast<double>(j.value("steps", int64_t{1}));
    // A non-finite loss is null in the log: it makes the epoch's mean NaN, as it was.
    const double loss = number(j, "loss").value_or(std::numeric_limits<double>::quiet_NaN());
    loss_sum += loss * steps;
    loss_steps += steps;
    o.epoch_loss = loss_sum / loss_steps;
    if (const auto a = number(j, "accuracy")) {
      accuracy_sum += *a * steps;
      accuracy_steps += steps;
      o.epoch_accuracy = accuracy_sum / accuracy_steps;
    }
    // A line's step_ms and cpu_utilization are its steps' means: weighted by "steps" too.
    const auto ms = number(j, "step_ms"), cpu = number(j, "cpu_utilization");
    if (ms && cpu) {
      wall_seconds += *ms * 1e-3 * steps;
      cpu_seconds += *cpu * *ms * 1e-3 * steps;
      if (wall_seconds > 0) o.cpu_utilization = cpu_seconds / wall_seconds;
    }
    if (const auto g = number(j, "gpu_utilization_pct")) {
      gpu_sum += *g * steps;
      gpu_steps += steps;
      o.gpu_utilization_pct = gpu_sum / gpu_steps;
    }
    if (j.contains("gpu_memory_used_bytes") && j["gpu_memory_used_bytes"].is_number_unsigned())
      o.gpu_memory_peak_bytes =
          std::max(o.gpu_memory_peak_bytes.value_or(0), j["gpu_memory_used_bytes"].get<uint64_t>());
    if (j.contains("val_loss")) {
      o.val_loss = number(j, "val_loss").value_or(std::numeric_limits<double>::quiet_NaN());
      o.val_accuracy = number(j, "val_accuracy");
      if (std::isfinite(*o.val_loss) && (!o.best_val_loss || *o.val_loss < *o.best_val_loss)) {
        o.best_val_loss = *o.val_loss;
        o.best_step = j["step"].get<int64_t>();
      }
    }
  }
  return o;
}

}  // namespace minitrain
