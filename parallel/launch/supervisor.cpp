// The supervisor's loop is the launcher's for one child: poll its output pipe for up to kChildTick,
// pass the lines on, forward a signal it got, reap the child when it ends. The Subprocess
// destructor kills what the command left in its group before the next run starts.

#include "parallel/launch/supervisor.h"

#include <poll.h>
#include <signal.h>

#include <optional>
#include <thread>

#include "core/error.h"
#include "parallel/launch/forwarded_signals.h"
#include "parallel/launch/subprocess.h"

namespace minitrain {
namespace {

constexpr std::chrono::milliseconds kChildTick{20};
constexpr std::chrono::milliseconds kChildDrain{200};  // output its own children may still write

struct RunEnd {
  ExitStatus status;
  int pid = 0;
  int interrupted = 0;  // the signal the supervisor got, 0 if none
};

RunEnd run_once(const SuperviseOptions& o, int restart, std::ostream& out, std::ostream& err) {
  SubprocessOptions so;
  so.argv = o.command;
  so.env = {{kRestartCountVariable, std::to_string(restart)}};
  Subprocess child = Subprocess::start(so);
  auto pass_on = [&] {
    for (const std::string& line : child.read_lines()) out << line << '\n';
    out.flush();
  };
  RunEnd end;
  end.pid = child.pid();
  std::optional<std::chrono::steady_clock::time_point> kill_at;
  for (;;) {
    if (child.output_fd() >= 0) {
      pollfd fd{child.output_fd(), POLLIN, 0};
      ::poll(&fd, 1, static_cast<int>(kChildTick.count()));
    } else {
      std::this_thread::sleep_for(kChildTick);
    }
    pass_on();
    if (const int sig = ForwardedSignals::take()) {
      if (!end.interrupted) end.interrupted = sig;
      child.signal(sig);
      child.signal(SIGCONT);
      err << "minitrain supervise: got signal " << sig << " (" << signal_name(sig)
          << "); forwarded it to the command (pid " << child.pid() << ")" << std::endl;
      if (!kill_at) kill_at = std::chrono::steady_clock::now() + o.grace;
    }
    if (const auto status = child.poll()) {
      end.status = *status;
      break;
    }
    if (kill_at && std::chrono::steady_clock::now() >= *kill_at) child.signal(SIGKILL);
  }
  const auto drain_until = std::chrono::steady_clock::now() + kChildDrain;
  while (child.output_fd() >= 0 && std::chrono::steady_clock::now() < drain_until) {
    pass_on();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  pass_on();
  return end;
}

int child_exit_code(const ExitStatus& s) { return s.signal != 0 ? 128 + s.signal : s.code; }

}  // namespace

int supervise(const SuperviseOptions& o, std::ostream& out, std::ostream& err) {
  MT_CHECK_AS(ValueError, !o.command.empty() && !o.command[0].empty(),
              "supervise: no command given; put it after --, as in: minitrain supervise "
              "--max-restarts 3 -- mpirun -n 2 minitrain train ...");
  MT_CHECK_AS(ValueError, o.grace.count() >= 0, "supervise: --grace must be >= 0 seconds");
  check_restart_options(o.restarts, "supervise");

  ForwardedSignals signals;  // before the first child, so no signal falls between the two
  RestartPolicy policy(o.restarts);
  for (;;) {
    const RunEnd end = run_once(o, policy.restarts(), out, err);
    if (end.interrupted) return 128 + end.interrupted;
    if (end.status.ok()) return 0;
    const std::string failure =
        detail::concat("the command (pid ", end.pid, ") ", failure_clause(end.status));
    if (!policy.restart_after_failure(false)) {
      const std::string line = policy.give_up_line(failure);
      err << "minitrain supervise: " << (line.empty() ? failure : line) << std::endl;
      return child_exit_code(end.status);
    }
    err << "minitrain supervise: " << policy.restart_line(failure) << std::endl;
    if (const int sig = wait_backoff(policy.backoff())) {
      err << "minitrain supervise: got signal " << sig << " (" << signal_name(sig)
          << ") while waiting to restart; not restarting" << std::endl;
      return 128 + sig;
    }
  }
}

}  // namespace minitrain
