#pragma once
// `minitrain plot RUN_DIRS_OR_JSONL... [--metric loss,val_loss] [--out curves.png]`: training
// curves of one or many runs, side by side, drawn by scripts/plot_metrics.py with matplotlib. The
// command finds a Python that has matplotlib and the script (installed beside the command, or in
// this source tree), then becomes that Python: its output and exit status are the command's.

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace minitrain::cli {

class PlotCommand {
 public:
  explicit PlotCommand(CLI::App& parent);
  bool parsed() const;
  /// Returns only on error (exit status); otherwise the process is the plotting Python's.
  int run();

 private:
  CLI::App* app_;
  std::vector<std::string> runs_;
  std::string metric_, out_ = "curves.png", title_;
  bool roofline_ = false;  ///< --roofline: the runs are bench gemm --counters --json files
};

}  // namespace minitrain::cli
