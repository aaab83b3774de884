// A fixed backoff, as torchrun's: a job that fails at once, every time, gives up after
// max_restarts * backoff rather than spinning; a failure late in a long run costs one backoff.

#include "parallel/launch/restart_policy.h"

#include <sstream>
#include <thread>

#include "core/error.h"
#include "parallel/launch/forwarded_signals.h"

namespace minitrain {
namespace {

std::string seconds(std::chrono::milliseconds ms) {
  std::ostringstream s;
  s << static_cast<double>(ms.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace

void check_restart_options(const RestartOptions& o, const char* command) {
  MT_CHECK_AS(ValueError, o.max_restarts >= 0, command, ": --max-restarts ", o.max_restarts,
              " must be 0 (no restart) or more");
  MT_CHECK_AS(ValueError, o.backoff.count() >= 0 && o.backoff <= std::chrono::hours(1), command,
              ": --restart-backoff must be between 0 and 3600 seconds");
}

std::string failure_clause(const ExitStatus& s) {
  if (s.signal != 0)
    return detail::concat("was killed by signal ", s.signal, " (", signal_name(s.signal), ")");
  return detail::concat("exited with status ", s.code);
}

bool RestartPolicy::restart_after_failure(bool interrupted) {
  if (interrupted || restarts_ >= options_.max_restarts) return false;
  ++restarts_;
  return true;
}

std::string RestartPolicy::restart_line(const std::string& failure) const {
  return detail::concat("restart ", restarts_, " of ", options_.max_restarts, " after ", failure,
                        "; waiting ", seconds(options_.backoff));
}

std::string RestartPolicy::give_up_line(const std::string& failure) const {
  if (options_.max_restarts == 0) return "";
  return detail::concat("giving up after ", restarts_, restarts_ == 1 ? " restart" : " restarts",
                        "; the last failure: ", failure);
}

int wait_backoff(std::chrono::milliseconds backoff) {
  constexpr std::chrono::milliseconds kTick{10};
  const auto until = std::chrono::steady_clock::now() + backoff;
  for (;;) {
    if (const int sig = ForwardedSignals::take()) return sig;
    const auto now = std::chrono::steady_clock::now();
    if (now >= until) return 0;
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(kTick, until - now));
  }
}

}  // namespace minitrain
