#pragma once
// `minitrain launch -n N [--devices LIST] [--nnodes M --node-rank K --master-addr HOST
// --master-port PORT] [--grace SECONDS] [--max-restarts N [--restart-backoff SECONDS]] -- command
// args...`: one process per rank on this machine
// (parallel/launch/launcher.h does the work).

#include <ostream>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class LaunchCommand {
 public:
  explicit LaunchCommand(CLI::App& parent);
  bool parsed() const;
  /// Runs the job; ranks' lines to `out`, the launcher's to `err`. The exit code of the job
  /// (parallel/launch/launcher.h). Throws minitrain errors for options that cannot work.
  int run(std::ostream& out, std::ostream& err);

 private:
  CLI::App* app_;
  int nproc_ = 0;
  std::string devices_;
  int nnodes_ = 1;
  int node_rank_ = 0;
  std::string master_addr_;
  int master_port_ = 29500;
  double grace_seconds_ = 5.0;
  int max_restarts_ = 0;
  double backoff_seconds_ = 1.0;
  std::vector<std::string> command_;
};

}  // namespace minitrain::cli
