#pragma once
// What a finished run's metrics log (train/metrics_log.h) says of how well it trained: the mean
// training loss of its last epoch, and its held-out numbers. The pipelines summary compares runs
// by these, not by the last step's loss (one batch's, often a small last one). And what it used:
// CPU cores, and on a GPU with NVML the GPU's utilisation and memory.

#include <cstdint>
#include <optional>
#include <string>

namespace minitrain {

struct RunOutcome {
  int64_t epoch = 0;                     ///< the last epoch the log has steps of (from 1); 0: none
  std::optional<double> epoch_loss;      ///< the mean step loss of that epoch (weighted by "steps")
  std::optional<double> epoch_accuracy;  ///< classifiers: the same mean of "accuracy"
  std::optional<double> val_loss;        ///< the last evaluation's
  std::optional<double> val_accuracy;    ///< the last evaluation's (classifiers)
  std::optional<double> best_val_loss;   ///< the lowest evaluation's
  int64_t best_step = 0;                 ///< its step
  /// The CPU time of its logged steps over their wall time: the cores it kept busy on average.
  std::optional<double> cpu_utilization;
  std::optional<double> gpu_utilization_pct;      ///< the mean over the lines that have it
  std::optional<uint64_t> gpu_memory_peak_bytes;  ///< the highest gpu_memory_used_bytes
};

/// Reads the whole log; lines that are not step objects are skipped (a torn last line included).
/// A missing file gives an empty outcome.
RunOutcome read_run_outcome(const std::string& metrics_path);

}  // namespace minitrain
