#pragma once
// `minitrain supervise --max-restarts N -- CMD ARGS...`: restarts for jobs that another launcher
// starts (mpirun above all, which has no restarts of its own). CMD runs as a child leading its own
// process group, its output (stdout and stderr together) passes through to `out`, SIGINT, SIGTERM
// and SIGHUP are forwarded to its group (SIGKILL after the grace) and end the supervision; a
// failure (non-zero exit or a signal) runs CMD again under the restart policy of
// parallel/launch/restart_policy.h, with MINITRAIN_RESTART_COUNT=k in its environment, which
// mpirun passes on to its ranks.

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "parallel/launch/restart_policy.h"

namespace minitrain {

struct SuperviseOptions {
  std::vector<std::string> command;  ///< what runs, and runs again
  RestartOptions restarts;
  std::chrono::milliseconds grace{std::chrono::seconds(5)};  ///< from a forwarded signal to SIGKILL
};

/// Runs the command until it succeeds, is interrupted, or fails with no restart left; the
/// supervisor's own lines ("minitrain supervise: restart 1 of 2 after the command (pid 42) exited
/// with status 3; waiting 1 s") to `err`. Returns 0, the last failure's exit code (128 + signal for
/// a signal), or 128 + the signal that interrupted the supervisor. ValueError for bad options,
/// IoError when the command cannot start.
int supervise(const SuperviseOptions& options, std::ostream& out, std::ostream& err);

}  // namespace minitrain
