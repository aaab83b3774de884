#pragma once
// Ctrl-C and SIGTERM without losing the run: while a StopOnSignals lives, the first SIGINT or
// SIGTERM only asks the training loop to stop after the step in progress (it then writes a
// checkpoint, and --save if asked, and the command exits 130 or 143 saying how to resume). A
// second signal restores the default action and re-raises it, so the process ends at once;
// every file is written to a temporary and renamed, so what was already saved stays intact.

#include <atomic>

namespace minitrain {

class StopOnSignals {
 public:
  StopOnSignals();   ///< installs the handlers for SIGINT and SIGTERM; one instance at a time
  ~StopOnSignals();  ///< restores the previous handlers
  StopOnSignals(const StopOnSignals&) = delete;
  StopOnSignals& operator=(const StopOnSignals&) = delete;

  /// 0 until a signal arrives, then its number (SIGINT or SIGTERM). Read by the training loop.
  static const std::atomic<int>& requested() noexcept;
};

/// "SIGINT", "SIGTERM", or "a signal".
const char* stop_signal_name(int signal) noexcept;

}  // namespace minitrain
