// Faults of multi-process jobs, end to end with the real minitrain binary (issue 12):
//  - a DDP rank that is stopped (SIGSTOP) or killed ends the whole job within --comm-timeout + 10
//  s,
//    with the survivor's one-line CommError printed and no rank left running (before the fix the
//    survivor printed its error, then hung for ever in MPI_Finalize);
//  - `minitrain launch` and `minitrain pipelines` killed with SIGKILL take their children with
//  them;
//  - a pipelines run killed by a signal is reported as killed by it.
// CPU ranks of a DDP job need mpirun (the CPU backend is MPI; `minitrain launch` starts
// torchrun-style ranks, which only the GPU backend can join), so the DDP cases run under mpirun.
//
// Every process of a case carries MT_FAULT_TEST_TAG=<unique> in its environment (inherited from
// the command the test starts), so "nothing left running" is a scan of /proc for live processes
// with that tag: whoever their parent is now, grandchildren included. Zombies count as gone (the
// container's init may never reap an orphan).
//
// Needs MINITRAIN (the binary) and MPIEXEC (mpirun) in the environment
// (tests/parallel/CMakeLists.txt).

#include <gtest/gtest.h>
#include <signal.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/strings.h"
#include "parallel/launch/subprocess.h"
#include "tests/parallel/process_checks.h"

namespace minitrain {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr double kCommTimeoutSeconds = 2.0;  // the DDP cases' --comm-timeout
// The bound of the "done when": the deadline plus 10 s, from the fault to the job's end.
constexpr double kJobEndBoundSeconds = kCommTimeoutSeconds + 10.0;

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool non_empty(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && st.st_size > 0;
}

bool wait_until(const std::function<bool()>& done, std::chrono::milliseconds within) {
  const auto deadline = Clock::now() + within;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

std::vector<std::string> environment_of(int pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/environ");
  std::vector<std::string> vars;
  for (size_t start = 0, end; start < text.size(); start = end + 1) {
    end = text.find('\0', start);
    if (end == std::string::npos) end = text.size();
    vars.push_back(text.substr(start, end - start));
  }
  return vars;
}

bool has_var(const std::vector<std::string>& env, const std::string& entry) {
  for (const std::string& e : env)
    if (e == entry) return true;
  return false;
}

// Live processes whose environment holds every one of `entries` (NAME=value).
std::vector<int> live_processes_with(const std::vector<std::string>& entries) {
  std::vector<int> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    const std::vector<std::string> env = environment_of(static_cast<int>(pid));
    bool all = !env.empty();
    for (const std::string& e : entries) all = all && has_var(env, e);
    if (all && !testing::process_gone(static_cast<int>(pid))) pids.push_back(static_cast<int>(pid));
  }
  ::closedir(proc);
  return pids;
}

std::string pid_list(const std::vector<int>& pids) {
  return pids.empty() ? "none" : join(std::vector<int64_t>(pids.begin(), pids.end()), ", ");
}

// One case: a fresh directory, a unique tag, and at the end SIGKILL to whatever still carries the
// tag, so that a failing case leaves nothing behind either (a stopped rank would stay for ever).
class FaultCase : public ::testing::Test {
 protected:
  void SetUp() override {
    minitrain_ = env_or_empty("MINITRAIN");
    mpiexec_ = env_or_empty("MPIEXEC");
    ASSERT_FALSE(minitrain_.empty()) << "set MINITRAIN to the minitrain binary";
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    tag_ = std::string(info->name()) + "-" + std::to_string(::getpid());
    dir_ = ::testing::TempDir() + "minitrain_fault_" + tag_;
    ASSERT_EQ(std::system(("rm -rf '" + dir_ + "' && mkdir -p '" + dir_ + "'").c_str()), 0);
  }
  void TearDown() override {
    for (int pid : tagged()) ::kill(pid, SIGKILL);
  }

  std::vector<int> tagged() const { return live_processes_with({tag_entry()}); }
  std::string tag_entry() const { return "MT_FAULT_TEST_TAG=" + tag_; }
  std::string file(const std::string& name) const { return dir_ + "/" + name; }

  Subprocess start(std::vector<std::string> argv) {
    SubprocessOptions o;
    o.argv = std::move(argv);
    o.env = {{"MT_FAULT_TEST_TAG", tag_},
             // Open MPI as root, 2 ranks on however few cores, shared memory without ptrace (CI
             // containers).
             {"OMPI_ALLOW_RUN_AS_ROOT", "1"},
             {"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"},
             {"OMPI_MCA_rmaps_base_oversubscribe", "1"},
             {"OMPI_MCA_btl", "self,vader"},
             {"OMPI_MCA_btl_vader_single_copy_mechanism", "none"}};
    o.output_path = file("output.txt");
    return Subprocess::start(o);
  }

  // Asserts that nothing of the case runs any more, allowing `within` for processes that the
  // job's end has already doomed (a SIGKILL in flight) to go.
  void expect_nothing_left(std::chrono::milliseconds within) {
    std::vector<int> left;
    wait_until([&] { return (left = tagged()).empty(); }, within);
    EXPECT_TRUE(left.empty()) << "still running: " << pid_list(left) << "\noutput:\n"
                              << read_file(file("output.txt"));
  }

  std::string minitrain_, mpiexec_, tag_, dir_;
};

// ---- a stopped or killed DDP rank ----

class DdpFault : public FaultCase {
 protected:
  // Starts 2 ranks training for ever, waits until both have logged a step, sends `sig` to rank 1
  // and returns the seconds from then until mpirun ended (or -1 when it did not end in time).
  double fault_rank_one(int sig, ExitStatus* status) {
    if (mpiexec_.empty()) {
      ADD_FAILURE() << "set MPIEXEC to mpirun";
      return -1;
    }
    char timeout[32];
    std::snprintf(timeout, sizeof timeout, "%g", kCommTimeoutSeconds);
    Subprocess job = start({mpiexec_,
                            "-n",
                            "2",
                            minitrain_,
                            "train",
                            "--parallel",
                            "ddp",
                            "--model",
                            "mlp:4,16,2",
                            "--data",
                            "synthetic:96",
                            "--device",
                            "cpu",
                            "--steps",
                            "100000000",
                            "--batch-size",
                            "4",
                            "--comm-timeout",
                            timeout,
                            "--progress",
                            "none",
                            "--log",
                            file("m.jsonl")});
    const bool training = wait_until(
        [&] {
          return (non_empty(file("m.jsonl")) && non_empty(file("m.rank1.jsonl"))) ||
                 job.poll().has_value();
        },
        120s);
    if (!training || job.poll()) {
      ADD_FAILURE() << "the 2 ranks did not start training\n" << read_file(file("output.txt"));
      return -1;
    }
    const std::vector<int> rank1 = live_processes_with({tag_entry(), "OMPI_COMM_WORLD_RANK=1"});
    if (rank1.size() != 1) {
      ADD_FAILURE() << "want one process of rank 1, found " << pid_list(rank1);
      return -1;
    }
    const auto t0 = Clock::now();
    ::kill(rank1[0], sig);
    // Wait past the bound (so a slow end is measured, not only flagged), but not for ever.
    const std::optional<ExitStatus> s =
        job.wait_for(std::chrono::seconds(static_cast<int>(kJobEndBoundSeconds) + 20));
    if (!s) return -1;
    *status = *s;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }

  void check_job_ended(int sig) {
    ExitStatus status;
    const double seconds = fault_rank_one(sig, &status);
    const std::string output = read_file(file("output.txt"));
    ASSERT_GE(seconds, 0) << "mpirun still ran " << static_cast<int>(kJobEndBoundSeconds) + 20
                          << " s after rank 1 got " << signal_name(sig) << "\noutput:\n"
                          << output;
    std::printf(
        "[   TIME   ] rank 1 got %s; the job ended %.2f s later (--comm-timeout %g s, bound %g s), "
        "%s\n",
        signal_name(sig).c_str(), seconds, kCommTimeoutSeconds, kJobEndBoundSeconds,
        status.str().c_str());
    EXPECT_LE(seconds, kJobEndBoundSeconds) << output;
    EXPECT_FALSE(status.ok()) << "the job reported success after losing a rank\n" << output;
    expect_nothing_left(3s);
    output_ = output;
  }

  std::string output_;
};

// The survivor times out in its all-reduce, prints the one-line CommError, and aborts the MPI
// job instead of waiting in MPI_Finalize for the stopped rank; mpirun then ends the stopped one.
TEST_F(DdpFault, AStoppedRankEndsTheJobWithinTheDeadlinePlusTenSeconds) {
  check_job_ended(SIGSTOP);
  EXPECT_NE(output_.find("rank 0: minitrain: error: all_reduce: rank 0 waited"), std::string::npos)
      << "no CommError line from the surviving rank:\n"
      << output_;
}

TEST_F(DdpFault, AKilledRankEndsTheJobWithinTheDeadlinePlusTenSeconds) { check_job_ended(SIGKILL); }

// The other side of leaving after a failure: an orderly stop (SIGTERM to every rank: they stop
// after the same step, rank 0 writes the checkpoint, all exit 143) is not a lost peer, so no rank
// aborts the job, which could kill rank 0 in the middle of writing the checkpoint.
TEST_F(DdpFault, AnOrderlyStopOnSigtermIsNotAborted) {
  Subprocess job = start({mpiexec_,
                          "-n",
                          "2",
                          minitrain_,
                          "train",
                          "--parallel",
                          "ddp",
                          "--model",
                          "mlp:4,16,2",
                          "--data",
                          "synthetic:96",
                          "--device",
                          "cpu",
                          "--steps",
                          "100000000",
                          "--batch-size",
                          "4",
                          "--comm-timeout",
                          "30",
                          "--progress",
                          "none",
                          "--log",
                          file("m.jsonl"),
                          "--checkpoint-dir",
                          file("ckpt")});
  ASSERT_TRUE(wait_until(
      [&] { return non_empty(file("m.jsonl")) && non_empty(file("m.rank1.jsonl")); }, 120s))
      << read_file(file("output.txt"));
  const std::vector<int> ranks = live_processes_with({tag_entry(), "OMPI_COMM_WORLD_SIZE=2"});
  ASSERT_EQ(ranks.size(), 2u) << pid_list(ranks);
  for (int pid : ranks) ::kill(pid, SIGTERM);
  const std::optional<ExitStatus> s = job.wait_for(60s);
  const std::string output = read_file(file("output.txt"));
  ASSERT_TRUE(s.has_value()) << output;
  EXPECT_EQ(s->code, 128 + SIGTERM) << s->str() << "\n" << output;
  EXPECT_NE(output.find("interrupted by SIGTERM"), std::string::npos) << output;
  EXPECT_EQ(output.find("MPI_ABORT was invoked"), std::string::npos) << output;
  EXPECT_TRUE(non_empty(file("ckpt/checkpoint.safetensors"))) << output;
  expect_nothing_left(3s);
}

// ---- launch and pipelines killed with SIGKILL: no destructor runs, the kernel kills the children
// ----

TEST_F(FaultCase, LaunchKilledWithSigkillTakesItsRanksWithIt) {
  // Each rank starts a child of its own: the kernel kills the ranks (PR_SET_PDEATHSIG), the
  // launcher's group reaper their children.
  Subprocess launcher = start({minitrain_, "launch", "-n", "2", "--", "sh", "-c",
                               "sleep 120 & echo $! > " + dir_ + "/grandchild.$RANK; echo $$ > " +
                                   dir_ + "/rank.$RANK; wait"});
  ASSERT_TRUE(
      wait_until([&] { return non_empty(file("rank.0")) && non_empty(file("rank.1")); }, 30s))
      << read_file(file("output.txt"));
  // The launcher, its 2 ranks and their 2 children (and the launcher's reaper).
  ASSERT_GE(tagged().size(), 5u) << pid_list(tagged());
  ASSERT_EQ(::kill(launcher.pid(), SIGKILL), 0);
  ASSERT_TRUE(launcher.wait_for(10s).has_value());
  expect_nothing_left(5s);
}

std::string pipelines_config(int runs) {
  std::string s = "[defaults]\ndata = \"synthetic:256\"\nsteps = 100000000\ndevice = \"cpu\"\n";
  for (int i = 0; i < runs; ++i) s += "[[run]]\nname = \"r" + std::to_string(i) + "\"\n";
  return s;
}

TEST_F(FaultCase, PipelinesKilledWithSigkillTakesItsRunsWithIt) {
  std::ofstream(file("runs.toml")) << pipelines_config(2);
  Subprocess pipelines = start({minitrain_, "pipelines", "--config", file("runs.toml"), "--out",
                                file("out"), "--cpu-slots", "2", "--status-every", "0.2"});
  ASSERT_TRUE(wait_until(
      [&] {
        return non_empty(file("out/r0/metrics.jsonl")) && non_empty(file("out/r1/metrics.jsonl"));
      },
      60s))
      << read_file(file("output.txt"));
  ASSERT_GE(tagged().size(), 3u) << "want pipelines and its 2 runs: " << pid_list(tagged());
  ASSERT_EQ(::kill(pipelines.pid(), SIGKILL), 0);
  ASSERT_TRUE(pipelines.wait_for(10s).has_value());
  expect_nothing_left(5s);
}

// A run killed from outside (here kill -9, as the OOM killer would) is reported as killed by the
// signal, not "reasoned" by the progress line it printed last.
TEST_F(FaultCase, PipelinesReportsARunKilledByASignal) {
  std::ofstream(file("runs.toml")) << pipelines_config(1);
  Subprocess pipelines = start({minitrain_, "pipelines", "--config", file("runs.toml"), "--out",
                                file("out"), "--status-every", "0.2"});
  ASSERT_TRUE(wait_until([&] { return non_empty(file("out/r0/metrics.jsonl")); }, 60s))
      << read_file(file("output.txt"));
  std::vector<int> runs;  // the run: a tagged process other than pipelines and its group reaper
  for (int pid : tagged())
    if (pid != pipelines.pid() &&
        read_file("/proc/" + std::to_string(pid) + "/comm") != "mt-group-reaper\n")
      runs.push_back(pid);
  ASSERT_EQ(runs.size(), 1u) << pid_list(runs);
  ASSERT_EQ(::kill(runs[0], SIGKILL), 0);
  const std::optional<ExitStatus> s = pipelines.wait_for(30s);
  ASSERT_TRUE(s.has_value()) << read_file(file("output.txt"));
  EXPECT_EQ(s->code, 1) << s->str();
  const std::string summary = read_file(file("out/summary.json"));
  EXPECT_NE(summary.find("\"reason\": \"killed by signal 9 (SIGKILL)\""), std::string::npos)
      << summary;
  EXPECT_NE(read_file(file("output.txt")).find("killed by signal 9 (SIGKILL)"), std::string::npos)
      << read_file(file("output.txt"));
}

}  // namespace
}  // namespace minitrain
