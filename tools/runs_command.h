#pragma once
// `minitrain pipelines --config runs.toml [--out DIR] [--cpu-slots N] [--status-every SECONDS]`:
// every [[run]] of the file (train/runs_config.h) as its own `minitrain train` process on its
// own device, queued when the devices are busy (parallel/runs/run_scheduler.h). Each run gets
// DIR/NAME/ with config.toml, output.log and metrics.jsonl; DIR/summary.json and a table sum them
// up.

#include <ostream>
#include <string>

#include "train/runs_config.h"

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class RunsCommand {
 public:
  explicit RunsCommand(CLI::App& parent);
  bool parsed() const;
  /// Runs them all; the summary to `out`, live status to `status`. 0 when every run succeeded,
  /// 1 when any failed. Throws minitrain errors for a file that cannot be used at all.
  int run(std::ostream& out, std::ostream& status);

 private:
  CLI::App* app_;
  std::string config_path_;
  std::string out_dir_;
  int cpu_slots_ = 0;  ///< 0: as many runs at once as fit the cores (see run())
  std::size_t max_runs_ = kDefaultMaxRuns;
  bool overwrite_ = false;
  double status_every_ = 2.0;
};

}  // namespace minitrain::cli
