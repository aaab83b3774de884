// `minitrain supervise`: flag parsing only; the work is parallel/launch/supervisor.cpp.

#include "tools/supervise_command.h"

#include <CLI/CLI.hpp>

#include <chrono>

#include "core/error.h"
#include "parallel/launch/supervisor.h"

namespace minitrain::cli {

void add_restart_flags(CLI::App& app, int& max_restarts, double& backoff_seconds) {
  app.add_option(
         "--max-restarts", max_restarts,
         "run the job again when it fails, at most N times (default 0: never); restart k "
         "runs with MINITRAIN_RESTART_COUNT=k, and minitrain train --checkpoint-dir resumes "
         "from its last checkpoint then")
      ->type_name("N");
  app.add_option("--restart-backoff", backoff_seconds,
                 "seconds to wait before each restart (default 1)")
      ->type_name("SECONDS");
}

SuperviseCommand::SuperviseCommand(CLI::App& parent) {
  app_ = parent.add_subcommand("supervise",
                               "run a command (e.g. mpirun ...) and restart it when it fails");
  add_restart_flags(*app_, max_restarts_, backoff_seconds_);
  app_->add_option("--grace", grace_seconds_,
                   "seconds from a forwarded SIGINT/SIGTERM to SIGKILL (default 5)")
      ->type_name("SECONDS");
  app_->add_option("command", command_, "the command to run, after --")
      ->type_name("-- COMMAND ARGS...");
  app_->footer(
      "The command leads a process group of its own; SIGINT, SIGTERM and SIGHUP are forwarded "
      "to it\nand end the supervision (no restart). Example:\n"
      "  minitrain supervise --max-restarts 3 -- mpirun -n 2 minitrain train --parallel ddp \\\n"
      "      --checkpoint-dir ckpt --checkpoint-every 100\n");
}

bool SuperviseCommand::parsed() const { return app_->parsed(); }

int SuperviseCommand::run(std::ostream& out, std::ostream& err) {
  MT_CHECK_AS(ValueError, grace_seconds_ >= 0 && grace_seconds_ <= 3600, "supervise: --grace ",
              grace_seconds_, " must be between 0 and 3600 seconds");
  SuperviseOptions o;
  o.command = command_;
  o.restarts.max_restarts = max_restarts_;
  o.restarts.backoff = std::chrono::milliseconds(static_cast<long long>(backoff_seconds_ * 1000.0));
  o.grace = std::chrono::milliseconds(static_cast<long long>(grace_seconds_ * 1000.0));
  return supervise(o, out, err);
}

}  // namespace minitrain::cli
