// `minitrain plot`: find Python with matplotlib and the plot script, then exec it.

#include "tools/plot_command.h"

#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "parallel/launch/subprocess.h"

extern char** environ;

namespace minitrain::cli {
namespace {

namespace fs = std::filesystem;

// Whether `python -c "import matplotlib"` succeeds (quietly).
bool has_matplotlib(const std::string& python) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::string code = "import matplotlib";
  char* argv[] = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"), code.data(), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return false;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// $MINITRAIN_PYTHON, else the first of python3 (PATH) and /usr/bin/python3 (Debian's, where
// python3-matplotlib installs) that has matplotlib; "" when none.
std::string find_python() {
  if (const char* p = std::getenv("MINITRAIN_PYTHON"); p != nullptr && *p != '\0') return p;
  for (const char* p : {"python3", "/usr/bin/python3"})
    if (has_matplotlib(p)) return p;
  return "";
}

// $MINITRAIN_PLOT_SCRIPT, else share/minitrain/ beside an installed command, else this source
// tree's scripts/ (a build tree's command).
std::string find_script() {
  if (const char* p = std::getenv("MINITRAIN_PLOT_SCRIPT"); p != nullptr && *p != '\0') return p;
  std::error_code ec;
  const fs::path exe_dir = fs::path(self_executable()).parent_path();
  for (const fs::path& p : {exe_dir / ".." / "share" / "minitrain" / "plot_metrics.py",
                            fs::path(MINITRAIN_SOURCE_DIR) / "scripts" / "plot_metrics.py"})
    if (fs::is_regular_file(p, ec)) return p.lexically_normal().string();
  return "";
}

}  // namespace

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
}

bool PlotCommand::parsed() const { return app_->parsed(); }

int PlotCommand::run() {
  const std::string python = find_python();
  if (python.empty()) {
    std::cerr
        << "minitrain plot: error: no Python 3 with matplotlib found (tried $MINITRAIN_PYTHON, "
           "python3 and /usr/bin/python3); on Debian: sudo apt-get install "
           "python3-matplotlib (scripts/setup.sh installs it), elsewhere: pip install "
           "matplotlib\n";
    return 3;
  }
  const std::string script = find_script();
  if (script.empty()) {
    std::cerr << "minitrain plot: error: plot_metrics.py is neither in share/minitrain beside "
                 "this command nor in "
              << MINITRAIN_SOURCE_DIR << "/scripts; set MINITRAIN_PLOT_SCRIPT to its path\n";
    return 3;
  }
  std::vector<std::string> args{python, script, "--out", out_};
  if (!metric_.empty()) args.insert(args.end(), {"--metric", metric_});
  if (!title_.empty()) args.insert(args.end(), {"--title", title_});
  args.push_back("--");
  args.insert(args.end(), runs_.begin(), runs_.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execvp(python.c_str(), argv.data());
  std::cerr << "minitrain plot: error: cannot run " << python << ": " << std::strerror(errno)
            << "\n";
  return 3;
}

}  // namespace minitrain::cli
