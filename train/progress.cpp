// The progress bar and its plain-line fallback. Rates are wall-clock rates, as the run's "done"
// line's: a line's samples/s counts the samples of the steps since the previous line over the
// wall time since it (waits for data, logging and evaluation included, which a step's own
// samples_per_s leaves out); the bar's steps/s and the ETA are averages since the run started, so
// they settle instead of jumping with each step's time.

#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

constexpr int kBarWidth = 24;
constexpr double kRedrawSeconds = 0.1;  // a terminal redrawn more often only flickers
constexpr int64_t kLinesPerRun = 10;

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string general(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

}  // namespace

ProgressMode parse_progress_mode(const std::string& name) {
  if (name == "bar") return ProgressMode::Bar;
  if (name == "lines") return ProgressMode::Lines;
  if (name == "none") return ProgressMode::None;
  if (name == "auto") return isatty(STDERR_FILENO) ? ProgressMode::Bar : ProgressMode::Lines;
  MT_THROW(ValueError, "--progress: unknown value '", name,
           "' (choose one of: ", join(progress_mode_names(), ", "), ")");
}

std::vector<std::string> progress_mode_names() { return {"auto", "bar", "lines", "none"}; }

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  return buf;
}

// Steps between lines: a tenth of the run, rounded up to 1, 2 or 5 times a power of ten, so that a
// run prints at most about eleven lines at round steps (rounded down, a 16-step run printed every
// step and a 199-step one 199 lines).
namespace {
int64_t line_cadence(int64_t steps) {
  const int64_t tenth = std::max<int64_t>(1, (steps + kLinesPerRun - 1) / kLinesPerRun);
  for (int64_t scale = 1;; scale *= 10)
    for (const int64_t m : {1, 2, 5})
      if (m * scale >= tenth) return m * scale;
}
}  // namespace

Progress::Progress(std::ostream& out, ProgressMode mode, int64_t first_step, int64_t total_steps,
                   Now now)
    : out_(out),
      mode_(mode),
      first_step_(first_step),
      total_steps_(total_steps),
      every_(line_cadence(total_steps - first_step + 1)),
      now_(now ? std::move(now) : Now([] { return Clock::now(); })),
      start_(now_()),
      last_draw_(start_),
      window_start_(start_) {}

bool Progress::due(int64_t step) const {
  return step == first_step_ || step == total_steps_ || (step - first_step_ + 1) % every_ == 0;
}

std::string Progress::eta(int64_t step) const {
  const double elapsed = std::chrono::duration<double>(now_() - start_).count();
  const double done = static_cast<double>(step - first_step_ + 1);
  return format_duration(elapsed / done * static_cast<double>(total_steps_ - step));
}

bool Progress::draws(int64_t step) const {
  if (mode_ == ProgressMode::None) return false;
  if (mode_ == ProgressMode::Lines) return due(step);
  return step == total_steps_ || !open_line_ ||
         std::chrono::duration<double>(now_() - last_draw_).count() >= kRedrawSeconds;
}

void Progress::update(const StepStats& s) {
  if (mode_ == ProgressMode::None) return;
  window_samples_ += s.samples;
  const auto now = now_();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double steps_per_s =
      elapsed > 0 ? static_cast<double>(s.step - first_step_ + 1) / elapsed : 0.0;

  if (mode_ == ProgressMode::Lines) {
    if (!due(s.step)) return;
    // The wall rate over the window since the previous line (since the start for the first).
    const double window = std::chrono::duration<double>(now - window_start_).count();
    const double samples_per_s = window > 0 ? static_cast<double>(window_samples_) / window : 0.0;
    window_start_ = now;
    window_samples_ = 0;
    const int64_t percent = total_steps_ > 0 ? s.step * 100 / total_steps_ : 100;
    out_ << "step " << s.step << "/" << total_steps_ << " (" << percent << "%)  epoch " << s.epoch
         << "  loss " << (s.nothing_counted ? "- (no counted rows: no update)" : general(s.loss, 6))
         << "  lr " << general(s.lr, 4) << "  " << fixed(samples_per_s, 0) << " samples/s  ETA "
         << eta(s.step) << "\n";
    out_.flush();
    return;
  }

  // Bar: redraw at most every kRedrawSeconds, and always for the last step.
  if (s.step != total_steps_ &&
      std::chrono::duration<double>(now - last_draw_).count() < kRedrawSeconds && open_line_)
    return;
  last_draw_ = now;
  const double fraction = total_steps_ > 0 ? static_cast<double>(s.step) / total_steps_ : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  std::ostringstream line;
  line << "\r[" << std::string(filled, '#') << std::string(kBarWidth - filled, '.') << "] "
       << s.step << "/" << total_steps_ << "  loss " << general(s.loss, 5) << "  "
       << fixed(steps_per_s, 0) << " steps/s  ETA " << eta(s.step)
       << "\x1b[K";  // erase what a longer previous line left
  out_ << line.str();
  out_.flush();
  open_line_ = true;
}

void Progress::finish() {
  if (open_line_) {
    out_ << "\n";
    out_.flush();
    open_line_ = false;
  }
}

}  // namespace minitrain
