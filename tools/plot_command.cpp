// `minitrain plot`: find Python with matplotlib and the plot script, then run it and wait.

#include "tools/plot_command.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "tools/python_script.h"

namespace minitrain::cli {

PlotCommand::PlotCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "plot", "draw training curves (loss, val_loss, accuracy, ...) of runs side by side");
  app_->add_option("runs", runs_,
                   "metrics files (train --log), run directories, or pipelines directories")
      ->required();
  app_->add_option("--metric", metric_,
                   "comma-separated metrics (default: loss, and val_loss, accuracy, val_accuracy "
                   "where logged)");
  app_->add_option("--out", out_, "the picture: .png (default curves.png), .svg or .pdf");
  app_->add_option("--title", title_, "a title above the panels");
  app_->add_flag("--roofline", roofline_,
                 "draw the roofline of `minitrain bench gemm --counters --json FILE` instead "
                 "(default --out roofline.png; modelled, docs/emulator_counters.md)");
}

bool PlotCommand::parsed() const { return app_->parsed(); }

int PlotCommand::run() {
  const std::string python = find_python("matplotlib");
  if (python.empty()) {
    std::cerr
        << "minitrain plot: error: no Python 3 with matplotlib found (tried $MINITRAIN_PYTHON, "
           "python3 and /usr/bin/python3); on Debian: sudo apt-get install "
           "python3-matplotlib (scripts/setup.sh installs it), elsewhere: pip install "
           "matplotlib\n";
    return 3;
  }
  const char* script_name = roofline_ ? "plot_roofline.py" : "plot_metrics.py";
  const std::string script =
      find_script(roofline_ ? "MINITRAIN_ROOFLINE_SCRIPT" : "MINITRAIN_PLOT_SCRIPT", script_name);
  if (script.empty()) {
    std::cerr << "minitrain plot: error: " << script_name
              << " is neither in share/minitrain beside this command nor in "
              << MINITRAIN_SOURCE_DIR << "/scripts; set "
              << (roofline_ ? "MINITRAIN_ROOFLINE_SCRIPT" : "MINITRAIN_PLOT_SCRIPT")
              << " to its path\n";
    return 3;
  }
  if (roofline_) {
    if (runs_.size() != 1 || !metric_.empty() || !title_.empty()) {
      std::cerr << "minitrain plot --roofline: error: takes one file (the JSON of minitrain bench "
                   "gemm --counters --json FILE) and no --metric or --title\n";
      return 2;
    }
    const std::string out = app_->count("--out") > 0 ? out_ : "roofline.png";
    const int rc = run_and_wait({python, script, "--out", out, runs_[0]});
    if (rc == 0) return 0;
    std::cerr << "minitrain plot: error: " << python_failure(python, script, rc) << "\n";
    return rc > 0 ? rc : 3;
  }
  std::vector<std::string> args{python, script, "--out", out_};
  if (!metric_.empty()) args.insert(args.end(), {"--metric", metric_});
  if (!title_.empty()) args.insert(args.end(), {"--title", title_});
  args.push_back("--");
  args.insert(args.end(), runs_.begin(), runs_.end());
  // Waited for, not exec'd: an interpreter that fails (MINITRAIN_PYTHON=/bin/false once exited
  // 1 without a word) is then named with its exit status, below what it printed itself.
  const int rc = run_and_wait(args);
  if (rc == 0) return 0;
  std::cerr << "minitrain plot: error: " << python_failure(python, script, rc) << "\n";
  return rc > 0 ? rc : 3;
}

}  // namespace minitrain::cli
