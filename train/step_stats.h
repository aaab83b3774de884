#pragma once
// What one optimizer step reports: to the metrics log, the progress display and callbacks.

#include <cstdint>
#include <limits>
#include <optional>
#include <string>

#include "core/gpu_monitor.h"

namespace minitrain {

/// One held-out evaluation (train/validation.h). NaN where it does not apply.
struct ValMetrics {
  int64_t rows = 0;  ///< held-out rows evaluated (over all ranks)
  double loss = std::numeric_limits<double>::quiet_NaN();           ///< the training loss's mean
  double accuracy = std::numeric_limits<double>::quiet_NaN();       ///< classifiers: top-1
  double topk_accuracy = std::numeric_limits<double>::quiet_NaN();  ///< classifiers, topk > 1
  int64_t topk = 1;
  /// A stop (SIGINT/SIGTERM) cut it short between held-out batches: its numbers cover only part
  /// of the rows, so they are neither logged nor compared with the best (issue 30).
  bool interrupted = false;
};

struct StepStats {
  int64_t step = 0;         ///< from 1
  int64_t total_steps = 0;  ///< the step the run ends at
  int64_t epoch = 0;        ///< from 1: the epoch of the step's first batch
  double loss = 0.0;        ///< mean loss of the step's batches, before the update
  /// Classifiers: top-1 accuracy of the step's batches (before the update); NaN otherwise.
  double accuracy = std::numeric_limits<double>::quiet_NaN();
  bool epoch_end = false;         ///< the step took an epoch's last batch
  std::optional<ValMetrics> val;  ///< a held-out evaluation after this step, if one was due
  double lr = 0.0;                ///< the rate this step used
  /// Wall time of the step (forward, backward, update) on the host: the device may still be
  /// running the update, which the next step's first read of a device value waits for.
  double step_ms = 0.0;
  /// Of step_ms, the time spent waiting for the data loader's batches: near 0 when batches are
  /// prepared ahead in time, a large share when the device starves for data.
  double data_wait_ms = 0.0;
  /// The process's CPU time during the step, every thread (compute threads, loader workers):
  /// cpu_ms / step_ms is the cores the step kept busy, the log's cpu_utilization.
  double cpu_ms = 0.0;
  int64_t samples = 0;         ///< rows in the step's batches
  double samples_per_s = 0.0;  ///< samples / step time
  double grad_norm = -1.0;     ///< before clipping; < 0 when not clipping
  /// float16 loss scaling: the scale this step's loss was multiplied by (NaN without scaling),
  /// whether the step was skipped for an inf/NaN gradient, and the run's skipped steps so far.
  double loss_scale = std::numeric_limits<double>::quiet_NaN();
  bool skipped = false;
  int64_t skipped_steps = 0;
  /// Classifiers: every row of the step's batches (on every rank) was ignore_index or of a class
  /// weighted 0, so there was nothing to count: loss and accuracy NaN, and no update was made
  /// (torch's mean is 0/0 there; issue 30). Logged as "no_counted_rows", left out of the means.
  bool nothing_counted = false;
  std::string device;          ///< "cpu", "cuda:0"
  uint64_t memory_in_use = 0;  ///< device allocator bytes after the step
  uint64_t memory_peak = 0;
  uint64_t host_memory_peak = 0;  ///< the process's peak resident memory so far
  /// On a CUDA device where NVML can be read (core/gpu_monitor.h): its utilisation and memory.
  std::optional<GpuUsage> gpu;
};

}  // namespace minitrain
