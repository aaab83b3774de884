#pragma once
// Restarts of a failed job (torchrun's --max-restarts), shared by `minitrain launch` and
// `minitrain supervise`: after a failure (a non-zero exit or a signal), restart the whole job
// after a fixed backoff while restarts remain; never after the launcher itself was interrupted
// (SIGINT/SIGTERM/SIGHUP: the user asked it to stop). The k-th restart runs with
// MINITRAIN_RESTART_COUNT=k in its environment (0 on the first run), which `minitrain train
// --checkpoint-dir` reads to resume from its last checkpoint by itself.

#include <chrono>
#include <string>

#include "parallel/launch/subprocess.h"

namespace minitrain {

/// The variable a restarted job's processes get: how many restarts came before this run.
inline constexpr const char* kRestartCountVariable = "MINITRAIN_RESTART_COUNT";

struct RestartOptions {
  int max_restarts = 0;                                        ///< 0: fail at the first failure
  std::chrono::milliseconds backoff{std::chrono::seconds(1)};  ///< wait before each restart
};

/// ValueError naming the flag for a negative --max-restarts or a backoff outside 0 .. 1 hour.
void check_restart_options(const RestartOptions& options, const char* command);

/// How a process ended, as a clause: "was killed by signal 9 (SIGKILL)", "exited with status 3".
std::string failure_clause(const ExitStatus& status);

/// The bookkeeping of one job's restarts.
class RestartPolicy {
 public:
  explicit RestartPolicy(RestartOptions options) : options_(options) {}

  /// Restarts so far: the MINITRAIN_RESTART_COUNT of the run about to start.
  int restarts() const noexcept { return restarts_; }
  int max_restarts() const noexcept { return options_.max_restarts; }
  std::chrono::milliseconds backoff() const noexcept { return options_.backoff; }

  /// After a run failed: whether to run the job again, counting the restart when so. Never when
  /// the launcher was interrupted, nor after max_restarts restarts.
  bool restart_after_failure(bool interrupted);
  /// The line that records the restart just counted: "restart 1 of 3 after rank 1 (pid 42) was
  /// killed by signal 9 (SIGKILL); waiting 1 s".
  std::string restart_line(const std::string& failure) const;
  /// The line of a job that failed with no restart left ("" when max_restarts is 0: the failure's
  /// own line says it all): "giving up after 3 restarts; the last failure: ...".
  std::string give_up_line(const std::string& failure) const;

 private:
  RestartOptions options_;
  int restarts_ = 0;
};

/// Sleeps `backoff`, waking every few milliseconds to take a ForwardedSignals signal; returns it
/// (the wait ends at once then) or 0 after the full wait.
int wait_backoff(std::chrono::milliseconds backoff);

}  // namespace minitrain
