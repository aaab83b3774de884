#pragma once
// Metrics as JSON lines: one object per optimizer step,
//   {"step":1,"epoch":1,"loss":0.52,"lr":0.003,"step_ms":0.41,"samples_per_s":156000,
//    "device":"cpu","memory_in_use_bytes":123456,"memory_peak_bytes":234567}
// flushed line by line, so a run that stops keeps every step it finished.

#include <cstdint>
#include <fstream>
#include <string>

#include "train/step_stats.h"

namespace minitrain {

class MetricsLog {
 public:
  /// Starts `path` afresh, or (continue_after_step >= 0, for a resumed run) keeps its lines up to
  /// and including that step and appends after them. A torn last line (a write cut short by a
  /// full disk or a kill) is dropped and named in repair_note(); a bad line before the last is an
  /// IoError, as is a file that cannot be written.
  explicit MetricsLog(const std::string& path, int64_t continue_after_step = -1);
  void write(const StepStats& stats);
  const std::string& path() const noexcept { return path_; }
  /// What resuming had to repair in the old log ("dropped a torn last line ..."), or "".
  const std::string& repair_note() const noexcept { return repair_note_; }

 private:
  std::string path_;
  std::string repair_note_;
  std::ofstream out_;
};

/// One log line (without the newline).
std::string metrics_json_line(const StepStats& stats);

/// The log file of rank `rank` in a job of `world_size` ranks: `path` itself for rank 0 (and for a
/// single process), else ".rank<r>" before the extension, so every rank writes its own file:
/// runs/metrics.jsonl -> runs/metrics.rank1.jsonl; a name without extension gets it at the end.
std::string rank_log_path(const std::string& path, int rank, int world_size);

}  // namespace minitrain
