// The launcher: the variables each rank sees, prefixed output, a failing rank stopping the job
// quickly (the time bound is a correctness bound: the job must not wait for the sleeping ranks),
// ranks killed by signals, signals forwarded, and options that cannot work.

#include "parallel/launch/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "tests/parallel/process_checks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using namespace std::chrono_literals;
using ::minitrain::testing::becomes_gone;
using ::minitrain::testing::error_message;
using ::minitrain::testing::process_gone;

LaunchOptions sh_job(int n, const std::string& script) {
  LaunchOptions o;
  o.nproc = n;
  o.command = {"sh", "-c", script};
  return o;
}

std::vector<std::string> sorted_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::sort(lines.begin(), lines.end());
  return lines;
}

struct JobResult {
  int code = -1;
  std::string out, err;
  double seconds = 0;
};

JobResult run(const LaunchOptions& o) {
  std::ostringstream out, err;
  const auto t0 = std::chrono::steady_clock::now();
  JobResult r;
  r.code = launch(o, out, err);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.out = out.str();
  r.err = err.str();
  return r;
}

TEST(Launcher, EveryRankSeesItsVariablesAndTheSameJobId) {
  const JobResult r =
      run(sh_job(3,
                 "echo $RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE/$MASTER_ADDR/$MASTER_PORT "
                 "job=$MINITRAIN_JOB_ID cvd=${CUDA_VISIBLE_DEVICES-unset}"));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto lines = sorted_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  const std::string job =
      lines[0].substr(lines[0].find("job="), lines[0].find(" cvd") - lines[0].find("job="));
  EXPECT_GT(job.size(), 10u) << lines[0];
  for (int rank = 0; rank < 3; ++rank) {
    const std::string want = "[rank " + std::to_string(rank) + "] " + std::to_string(rank) + "/3/" +
                             std::to_string(rank) + "/3/127.0.0.1/29500 " + job;
    EXPECT_EQ(lines[rank].substr(0, want.size()), want);
  }
  // A second launch is another job: another id, so its rendezvous files are its own.
  const JobResult again = run(sh_job(1, "echo $MINITRAIN_JOB_ID"));
  EXPECT_EQ(again.out.find(job.substr(4)), std::string::npos) << again.out;
}

TEST(Launcher, DevicesBecomeCudaVisibleDevicesAndNodesOffsetTheRanks) {
  LaunchOptions o = sh_job(
      2, "echo $RANK/$WORLD_SIZE/$LOCAL_RANK $MASTER_ADDR:$MASTER_PORT $CUDA_VISIBLE_DEVICES");
  o.devices = {"3", "5"};
  o.nnodes = 3;
  o.node_rank = 1;
  o.master_addr = "node0";
  o.master_port = 1234;
  const JobResult r = run(o);
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(sorted_lines(r.out), (std::vector<std::string>{"[rank 2] 2/6/0 node0:1234 3,5",
                                                           "[rank 3] 3/6/1 node0:1234 3,5"}));
}

TEST(Launcher, PrefixesStdoutAndStderrLinesIncludingALastPartialLine) {
  const JobResult r = run(sh_job(2, "echo out $RANK; echo err $RANK >&2; printf 'tail'"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(sorted_lines(r.out),
            (std::vector<std::string>{"[rank 0] err 0", "[rank 0] out 0", "[rank 0] tail",
                                      "[rank 1] err 1", "[rank 1] out 1", "[rank 1] tail"}));
}

TEST(Launcher, AFailingRankStopsTheOthersWithinSeconds) {
  LaunchOptions o = sh_job(3, "if [ $RANK = 1 ]; then sleep 0.3; exit 3; fi; sleep 60");
  o.grace = 2s;
  const JobResult r = run(o);
  EXPECT_EQ(r.code, 3);
  EXPECT_LT(r.seconds, 10.0) << "the launcher waited for the sleeping ranks";
  EXPECT_NE(r.err.find("minitrain launch: rank 1 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") failed: exit status 3; stopped ranks 0, 2\n"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST(Launcher, ARankThatIgnoresSigtermIsKilledAfterTheGrace) {
  const std::string marker =
      ::testing::TempDir() + "launcher_ignores_term_" + std::to_string(::getpid());
  std::remove(marker.c_str());
  // Rank 0 fails only once rank 1 ignores TERM (it and the sleep it starts), so only SIGKILL ends
  // rank 1.
  LaunchOptions o = sh_job(2, "if [ $RANK = 0 ]; then while [ ! -e " + marker +
                                  " ]; do sleep 0.01; done; exit 1; fi; trap '' TERM; touch " +
                                  marker + "; sleep 60; sleep 60");
  o.grace = 300ms;
  const JobResult r = run(o);
  std::remove(marker.c_str());
  EXPECT_EQ(r.code, 1);
  EXPECT_GE(r.seconds, 0.3);  // rank 1 had its grace
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("failed: exit status 1; stopped rank 1\n"), std::string::npos) << r.err;
}

int read_pid(const std::string& path) {
  std::ifstream in(path);
  int pid = -1;
  in >> pid;
  return pid;
}

// The failed rank's own children are stopped with the job, not only the other ranks.
TEST(Launcher, AFailingRankTakesTheProcessesItStartedWithIt) {
  const std::string file =
      ::testing::TempDir() + "launcher_grandchild_" + std::to_string(::getpid());
  std::remove(file.c_str());
  LaunchOptions o = sh_job(2, "if [ $RANK = 0 ]; then sleep 60 >/dev/null 2>&1 & echo $! > " +
                                  file + "; sleep 0.3; exit 3; fi; sleep 60");
  o.grace = 2s;
  const JobResult r = run(o);
  const int grandchild = read_pid(file);
  std::remove(file.c_str());
  EXPECT_EQ(r.code, 3) << r.err;
  ASSERT_GT(grandchild, 0) << "rank 0 did not start its child";
  EXPECT_TRUE(becomes_gone(grandchild))
      << "rank 0's child (pid " << grandchild << ") outlived the job";
}

// A rank that succeeds but leaves a process behind: the job still ends with nothing running.
TEST(Launcher, ProcessesLeftBehindByASucceedingRankEndWithTheJob) {
  const std::string file = ::testing::TempDir() + "launcher_leftover_" + std::to_string(::getpid());
  std::remove(file.c_str());
  const JobResult r = run(sh_job(1, "sleep 60 >/dev/null 2>&1 & echo $! > " + file));
  const int leftover = read_pid(file);
  std::remove(file.c_str());
  EXPECT_EQ(r.code, 0) << r.err;
  ASSERT_GT(leftover, 0);
  EXPECT_TRUE(becomes_gone(leftover)) << "pid " << leftover << " outlived the job";
}

// A stopped rank cannot act on SIGTERM; the launcher continues it so that it can, instead of
// waiting out the grace for SIGKILL.
TEST(Launcher, AStoppedRankIsEndedWhenTheJobStops) {
  LaunchOptions o =
      sh_job(2, "if [ $RANK = 0 ]; then sleep 0.5; exit 3; fi; kill -STOP $$; sleep 60");
  o.grace = 30s;
  const JobResult r = run(o);
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_LT(r.seconds, 20.0) << "the stopped rank sat out the grace";
  EXPECT_NE(r.err.find("failed: exit status 3; stopped rank 1\n"), std::string::npos) << r.err;
}

TEST(Launcher, NamesARankKilledByASignal) {
  const JobResult r = run(sh_job(2, "if [ $RANK = 0 ]; then kill -9 $$; fi; sleep 60"));
  EXPECT_EQ(r.code, 128 + 9);
  EXPECT_LT(r.seconds, 10.0);
  EXPECT_NE(r.err.find("rank 0 (pid "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(") failed: signal 9 (Killed); stopped rank 1"), std::string::npos) << r.err;
}

TEST(Launcher, ForwardsSigtermToEveryRank) {
  const std::string dir = ::testing::TempDir() + "launcher_signal_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf '" + dir + "' && mkdir -p '" + dir + "'").c_str()), 0);
  // Each rank reports the TERM it receives; a marker file says it is up (and the handler is in
  // place).
  LaunchOptions o = sh_job(2, "trap 'echo got TERM; exit 0' TERM; touch " + dir +
                                  "/ready.$RANK; while :; do sleep 0.05; done");
  auto job = std::async(std::launch::async, [&] { return run(o); });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while ((::access((dir + "/ready.0").c_str(), F_OK) != 0 ||
          ::access((dir + "/ready.1").c_str(), F_OK) != 0) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(5ms);
  ASSERT_EQ(::kill(::getpid(), SIGTERM), 0);  // caught by the launcher, not fatal to this test
  const JobResult r = job.get();
  EXPECT_EQ(r.code, 128 + SIGTERM);
  std::vector<std::string> got;  // the shell may also report its killed sleep ("Terminated")
  for (const std::string& line : sorted_lines(r.out))
    if (line.find("got TERM") != std::string::npos) got.push_back(line);
  EXPECT_EQ(got, (std::vector<std::string>{"[rank 0] got TERM", "[rank 1] got TERM"})) << r.out;
  EXPECT_NE(r.err.find("got signal 15 (Terminated); forwarded it to rank(s) 0, 1"),
            std::string::npos)
      << r.err;
}

TEST(Launcher, ExitsZeroWhenEveryRankSucceeds) {
  const JobResult r = run(sh_job(4, "sleep 0.$RANK; exit 0"));
  EXPECT_EQ(r.code, 0);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "");
}

TEST(Launcher, RejectsOptionsThatCannotWork) {
  auto message = [](LaunchOptions o) { return error_message([&] { check_launch_options(o); }); };
  LaunchOptions o = sh_job(2, "true");
  EXPECT_EQ(message(o), "(no exception)");
  o.nproc = 0;
  EXPECT_THROW(check_launch_options(o), ValueError);
  EXPECT_NE(message(o).find("-n 0 is not a number of ranks"), std::string::npos);
  o.nproc = 2;
  o.devices = {"0", "1", "2"};
  EXPECT_NE(message(o).find("--devices lists 3 GPU(s) but -n 2 starts 2 rank(s)"),
            std::string::npos);
  o.devices = {"1", "1"};
  EXPECT_NE(message(o).find("lists GPU 1 twice"), std::string::npos);
  o.devices = {"0", ""};
  EXPECT_NE(message(o).find("empty or malformed entry ''"), std::string::npos);
  o.devices.clear();
  o.command.clear();
  EXPECT_NE(message(o).find("no command given; put it after --"), std::string::npos);
  o.command = {"true"};
  o.nnodes = 2;
  EXPECT_NE(message(o).find("--nnodes 2 needs --master-addr HOST"), std::string::npos);
  o.master_addr = "node0";
  o.node_rank = 2;
  EXPECT_NE(message(o).find("--node-rank 2 is not a node of --nnodes 2"), std::string::npos);
  o.node_rank = 0;
  o.master_port = 0;
  EXPECT_NE(message(o).find("--master-port 0 is not a TCP port"), std::string::npos);
  // launch() checks too, before it starts anything.
  o.master_port = 29500;
  o.nproc = 0;
  std::ostringstream out, err;
  EXPECT_THROW(launch(o, out, err), ValueError);
}

TEST(Launcher, NamesACommandThatCannotStart) {
  LaunchOptions o;
  o.nproc = 2;
  o.command = {"minitrain-no-such-program"};
  std::ostringstream out, err;
  EXPECT_THROW(launch(o, out, err), IoError);
  EXPECT_NE(
      error_message([&] { launch(o, out, err); }).find("cannot run 'minitrain-no-such-program'"),
      std::string::npos);
}

}  // namespace
}  // namespace minitrain
