#pragma once
// Metrics as JSON lines: one object per optimizer step,
//   {"step":1,"epoch":1,"loss":0.52,"lr":0.003,"step_ms":0.41,"data_wait_ms":0.01,
//    "samples_per_s":156000,"cpu_utilization":1.93,
//    "device":"cpu","memory_in_use_bytes":123456,"memory_peak_bytes":234567,
//    "host_memory_peak_bytes":45678912}
// (cpu_utilization: the process's CPU time over the step's wall time, in cores; on a CUDA device
// where NVML can be read, "gpu_utilization_pct", "gpu_memory_used_bytes" and
// "gpu_memory_total_bytes" follow: core/gpu_monitor.h)
// (a non-finite loss is null, with "loss_nonfinite": "inf", "-inf" or "nan" beside it; a
// classifier's step whose every row was ignored has "loss": null, "no_counted_rows": true and made
// no update, and is left out of an interval's means); a
// classifier's lines add "accuracy" (of the step's batches), a step that ends an epoch adds
// "epoch_end": true, and one followed by a held-out evaluation adds "val_loss", "val_rows" and for
// classifiers "val_accuracy" (and "val_top<k>_accuracy" for --topk k > 1)
// flushed line by line, so a run that stops keeps every step it finished. With an interval of
// N > 1 steps (--log-every N) a line stands for the steps since the previous line, at step k*N and
// at the run's last or stopping step: "steps" says how many, loss, step_ms, data_wait_ms and
// grad_norm are their means (accuracy and gpu_utilization_pct too), samples_per_s their samples
// over their time, cpu_utilization their CPU time over their time, lr, epoch and memory in use the
// last step's, memory_peak_bytes and gpu_memory_used_bytes the highest, the val_ fields the
// interval's last evaluation's, and epoch_end whether any of its steps ended an epoch.

#include <cstdint>
#include <optional>
#include <string>

#include "train/step_stats.h"

namespace minitrain {

class MetricsLog {
 public:
  /// Starts `path` afresh, or (continue_after_step >= 0, for a resumed run) keeps its lines up to
  /// and including that step and appends after them. A torn last line (a write cut short by a
  /// full disk or a kill) is dropped and named in repair_note(); a bad line before the last is an
  /// IoError, as is a file that cannot be written.
  /// `every`: the steps a line stands for (>= 1; ValueError otherwise).
  /// Every write goes straight to the file (a line at a time, no buffer): one that fails (a full
  /// disk) is an IoError naming the file and the system's reason, and the lines before it stay.
  explicit MetricsLog(const std::string& path, int64_t continue_after_step = -1, int64_t every = 1);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  /// Adds a step; writes its line when it ends an interval (step % every == 0, or the run's last).
  void write(const StepStats& stats);
  /// Writes the steps added since the last line, if any (a run that stops or fails early).
  void flush_pending();
  const std::string& path() const noexcept { return path_; }
  int64_t every() const noexcept { return every_; }  ///< steps a line stands for
  /// What resuming had to repair in the old log ("dropped a torn last line ..."), or "".
  const std::string& repair_note() const noexcept { return repair_note_; }

 private:
  void write_line(const StepStats& stats, int64_t steps);

  std::string path_;
  std::string repair_note_;
  int fd_ = -1;
  int64_t every_ = 1;
  // The interval being summed: its steps, and the sums that become means.
  int64_t pending_steps_ = 0;
  StepStats pending_last_;
  double loss_sum_ = 0, ms_sum_ = 0, grad_norm_sum_ = 0, accuracy_sum_ = 0, wait_sum_ = 0;
  double cpu_ms_sum_ = 0, gpu_utilization_sum_ = 0;
  int64_t gpu_samples_ = 0;
  uint64_t gpu_memory_max_ = 0;
  std::optional<ValMetrics> val_;
  bool epoch_end_ = false;
  int64_t samples_ = 0, grad_norms_ = 0;
  int64_t counted_steps_ = 0;  // the interval's steps that had a row to count
  uint64_t peak_ = 0;
};

/// One log line (without the newline); `steps` > 0 adds "steps" (a line for several steps).
std::string metrics_json_line(const StepStats& stats, int64_t steps = 0);

/// The log file of rank `rank` in a job of `world_size` ranks: `path` itself for rank 0 (and for a
/// single process), else ".rank<r>" before the extension, so every rank writes its own file:
/// runs/metrics.jsonl -> runs/metrics.rank1.jsonl; a name without extension gets it at the end.
std::string rank_log_path(const std::string& path, int rank, int world_size);

}  // namespace minitrain
