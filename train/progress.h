#pragma once
// Progress of a run. On a terminal, one line redrawn in place:
//   [##########..........]  640/1280  loss 0.01234  2345 steps/s  ETA 0:02
// otherwise (a file, a pipe, CI) a plain line about every tenth of the run and at the end:
//   step 128/1280 (10%)  epoch 1  loss 0.012345  lr 0.003  150000 samples/s  ETA 0:02

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "train/step_stats.h"

namespace minitrain {

enum class ProgressMode { Bar, Lines, None };

/// "bar" | "lines" | "none" | "auto" (a bar when stderr is a terminal, else lines).
ProgressMode parse_progress_mode(const std::string& name);
/// The names parse_progress_mode accepts, in the order --help and error messages list them.
std::vector<std::string> progress_mode_names();

class Progress {
 public:
  /// Reports steps first_step..total_steps to `out`.
  Progress(std::ostream& out, ProgressMode mode, int64_t first_step, int64_t total_steps);
  void update(const StepStats& stats);
  /// Whether update() at `step` would draw (a line due, or the bar's redraw time come): the
  /// trainer reads the step's loss from the device only then (issue 35).
  bool draws(int64_t step) const;
  /// Ends the bar's line (a no-op for lines and none); call once the run stops, however it stops.
  void finish();

 private:
  bool due(int64_t step) const;
  std::string eta(int64_t step) const;

  std::ostream& out_;
  ProgressMode mode_;
  int64_t first_step_, total_steps_;
  int64_t every_;  // lines mode: steps between lines
  bool open_line_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

/// "1:05", "0:02", "2:03:04".
std::string format_duration(double seconds);

}  // namespace minitrain
