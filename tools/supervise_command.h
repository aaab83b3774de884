#pragma once
// `minitrain supervise --max-restarts N [--restart-backoff SECONDS] [--grace SECONDS] -- command
// args...`: runs the command, and runs it again when it fails (parallel/launch/supervisor.h does
// the work). For jobs that mpirun starts: minitrain supervise --max-restarts 3 -- mpirun -n 2
// minitrain train --parallel ddp --checkpoint-dir ckpt ...

#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class SuperviseCommand {
 public:
  explicit SuperviseCommand(CLI::App& parent);
  bool parsed() const;
  /// The command's output to `out`, the supervisor's lines to `err`; the exit code of the last run.
  int run(std::ostream& out, std::ostream& err);

 private:
  CLI::App* app_;
  int max_restarts_ = 0;
  double backoff_seconds_ = 1.0;
  double grace_seconds_ = 5.0;
  std::vector<std::string> command_;
};

/// The flags both launch and supervise take: --max-restarts and --restart-backoff.
void add_restart_flags(CLI::App& app, int& max_restarts, double& backoff_seconds);

}  // namespace minitrain::cli
