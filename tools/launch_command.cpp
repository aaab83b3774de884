// `minitrain launch`: flag parsing only; the work is parallel/launch/launcher.cpp.

#include "tools/launch_command.h"

#include <CLI/CLI.hpp>

#include <chrono>

#include "core/error.h"
#include "core/strings.h"
#include "parallel/launch/launcher.h"
#include "tools/supervise_command.h"

namespace minitrain::cli {

LaunchCommand::LaunchCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "launch", "one process per rank on this machine (RANK, WORLD_SIZE, LOCAL_RANK, ...)");
  app_->add_option("-n,--nproc", nproc_, "ranks on this machine")->required()->type_name("N");
  app_->add_option("--devices", devices_,
                   "GPUs for the ranks, one per rank (sets CUDA_VISIBLE_DEVICES)")
      ->type_name("LIST");
  app_->add_option("--nnodes", nnodes_, "machines in the job (run the launcher once on each)")
      ->type_name("M");
  app_->add_option("--node-rank", node_rank_, "this machine's index, 0 to M-1")->type_name("K");
  app_->add_option("--master-addr", master_addr_,
                   "address of node 0 (default 127.0.0.1 for one machine)")
      ->type_name("HOST");
  app_->add_option("--master-port", master_port_, "port on node 0 (default 29500)")
      ->type_name("PORT");
  app_->add_option("--grace", grace_seconds_,
                   "seconds from SIGTERM to SIGKILL when stopping ranks (default 5)")
      ->type_name("SECONDS");
  add_restart_flags(*app_, max_restarts_, backoff_seconds_);
  app_->add_option("command", command_, "the command every rank runs, after --")
      ->type_name("-- COMMAND ARGS...");
  app_->footer(
      "Each rank gets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT "
      "and\n"
      "MINITRAIN_JOB_ID; its output lines are prefixed \"[rank R] \". When a rank fails, the "
      "others are\n"
      "stopped and the launcher exits non-zero naming it. Example:\n"
      "  minitrain launch -n 2 -- minitrain train --parallel ddp --device cuda\n"
      "Multi-node: the same command on every node with --nnodes, --node-rank, --master-addr, and "
      "the\n"
      "same MINITRAIN_JOB_ID; MINITRAIN_RENDEZVOUS_DIR on a file system shared by the nodes. CPU "
      "ranks\n"
      "across processes need mpirun instead: mpirun -n 2 minitrain train --parallel ddp --device "
      "cpu\n");
}

bool LaunchCommand::parsed() const { return app_->parsed(); }

int LaunchCommand::run(std::ostream& out, std::ostream& err) {
  MT_CHECK_AS(ValueError, grace_seconds_ >= 0 && grace_seconds_ <= 3600, "launch: --grace ",
              grace_seconds_, " must be between 0 and 3600 seconds");
  LaunchOptions o;
  o.nproc = nproc_;
  if (!devices_.empty()) {
    // Split on commas, keeping empty entries so that "0,,1" is reported rather than read as "0,1".
    o.devices = split(devices_, ',');
  }
  o.nnodes = nnodes_;
  o.node_rank = node_rank_;
  o.master_addr = master_addr_;
  o.master_port = master_port_;
  o.grace = std::chrono::milliseconds(static_cast<long long>(grace_seconds_ * 1000.0));
  o.command = command_;
  o.restarts.max_restarts = max_restarts_;
  o.restarts.backoff = std::chrono::milliseconds(static_cast<long long>(backoff_seconds_ * 1000.0));
  return launch(o, out, err);
}

}  // namespace minitrain::cli
