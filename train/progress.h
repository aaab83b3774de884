#pragma once
// Progress of a run. On a terminal, one line redrawn in place:
//   [##########..........]  640/1280  loss 0.01234  2345 steps/s  ETA 0:02
// otherwise (a file, a pipe, CI) a plain line about every tenth of the run and at the end:
//   step 128/1280 (10%)  epoch 1  loss 0.012345  lr 0.003  150000 samples/s  ETA 0:02
// where samples/s is the wall rate since the previous line (the "done" line's measure over the
// run), not the steps' own compute rate (the metrics log's samples_per_s).

#include <chrono>
#include <cstdint>
#include <functional>
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
  using Clock = std::chrono::steady_clock;
  /// The time now; tests inject a clock of their own.
  using Now = std::function<Clock::time_point()>;
  /// Reports steps first_step..total_steps to `out`; `now` (empty: steady_clock) times the rates.
  Progress(std::ostream& out, ProgressMode mode, int64_t first_step, int64_t total_steps,
           Now now = {});
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
  Now now_;
  Clock::time_point start_, last_draw_;
  // Lines mode: the samples of the steps since the previous line, and when that line was drawn.
  Clock::time_point window_start_;
  int64_t window_samples_ = 0;
};

/// "1:05", "0:02", "2:03:04".
std::string format_duration(double seconds);

}  // namespace minitrain
