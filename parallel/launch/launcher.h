#pragma once
// `minitrain launch`: one process per local rank of a job, started with the torchrun-style
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
// MINITRAIN_JOB_ID) that parallel/launch/process_env.h reads. The launcher prefixes each output
// line with its rank, forwards SIGINT/SIGTERM/SIGHUP to every rank, and when one rank fails (a
// non-zero exit or a signal) stops the others (SIGTERM, then SIGKILL after the grace) and reports
// that rank. Each rank leads a process group of its own, and stopping a rank stops its group, so
// what a rank started goes with it; nothing of the job outlives the launcher, even a SIGKILLed one
// (Note [child lifetime] in parallel/launch/subprocess.cpp).
//
// Multi-node: run the launcher once per node with the same --nnodes, --master-addr, --master-port
// and MINITRAIN_JOB_ID, and --node-rank 0 .. nnodes-1; ranks are node_rank * nproc + local rank.

#include <chrono>
#include <ostream>
#include <string>
#include <vector>

#include "parallel/launch/restart_policy.h"

namespace minitrain {

struct LaunchOptions {
  int nproc = 1;  ///< -n: ranks on this machine
  /// --devices: GPUs for the ranks, one per local rank (indices or UUIDs); the children get
  /// CUDA_VISIBLE_DEVICES=LIST, so LOCAL_RANK r uses the r-th listed GPU. Empty: left alone.
  std::vector<std::string> devices;
  int nnodes = 1;           ///< machines in the job
  int node_rank = 0;        ///< this machine's index among them
  std::string master_addr;  ///< "": 127.0.0.1 (one machine only)
  int master_port = 29500;
  std::chrono::milliseconds grace{std::chrono::seconds(5)};  ///< from SIGTERM to SIGKILL
  /// "": this launcher's MINITRAIN_JOB_ID if set, else (one machine) a fresh id; multi-node jobs
  /// need the same id on every node (the rendezvous files are named by it).
  std::string job_id;
  std::vector<std::string> command;  ///< what every rank runs
  /// --max-restarts, --restart-backoff: run the whole job again after a rank fails (restart k
  /// with MINITRAIN_RESTART_COUNT=k and MINITRAIN_JOB_ID suffixed "-restart-k"); 0: never.
  RestartOptions restarts;
};

/// ValueError naming the option and what to do for options that cannot work (-n 0, a --devices
/// list of the wrong length or with repeats, --node-rank outside --nnodes, multi-node without
/// --master-addr, no command).
void check_launch_options(const LaunchOptions& options);

/// The variables rank `local_rank` of this node gets (besides the inherited environment).
std::vector<std::pair<std::string, std::string>> rank_environment(const LaunchOptions& options,
                                                                  int local_rank,
                                                                  const std::string& job_id);

/// Runs the job to its end: rank output to `out` as "[rank R] line", the launcher's own lines
/// ("rank 1 (pid 4242) failed: exit status 3; stopped ranks 0, 2") to `err`. Returns 0 when every
/// rank exited 0; else the failed rank's exit code (128 + signal for a signal), or 128 + the
/// signal that interrupted the launcher. With restarts, a failed job runs again while restarts
/// remain ("restart 1 of 3 after rank 1 (pid 42) was killed by signal 9 (SIGKILL); waiting 1 s" to
/// `err`), and the last failure's code is returned. Throws ValueError / IoError when the job cannot
/// start (ranks already started are stopped first).
int launch(const LaunchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace minitrain
