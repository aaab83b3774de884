// Restarts: the policy's bookkeeping (counts, lines, no restart after an interrupt, a backoff that
// a signal cuts short), and the launcher and supervisor running a failed job again with
// MINITRAIN_RESTART_COUNT set, giving up after N with the last failure's exit code.

#include "parallel/launch/restart_policy.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "parallel/launch/forwarded_signals.h"
#include "parallel/launch/launcher.h"
#include "parallel/launch/supervisor.h"

namespace minitrain {
namespace {

using namespace std::chrono_literals;

RestartOptions restarts(int n, std::chrono::milliseconds backoff = 0ms) {
  RestartOptions o;
  o.max_restarts = n;
  o.backoff = backoff;
  return o;
}

// A fresh directory for marker files, removed at the end of the test.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/minitrain-restart-test-XXXXXX";
    path_ = ::mkdtemp(name);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RestartPolicy, CountsRestartsUpToTheMaximum) {
  RestartPolicy p(restarts(2));
  EXPECT_EQ(p.restarts(), 0);
  EXPECT_TRUE(p.restart_after_failure(false));
  EXPECT_EQ(p.restarts(), 1);
  EXPECT_TRUE(p.restart_after_failure(false));
  EXPECT_EQ(p.restarts(), 2);
  EXPECT_FALSE(p.restart_after_failure(false));  // the third failure is the last
  EXPECT_EQ(p.restarts(), 2);
}

TEST(RestartPolicy, ZeroRestartsNeverRestartsAndSaysNothingMore) {
  RestartPolicy p(restarts(0));
  EXPECT_FALSE(p.restart_after_failure(false));
  EXPECT_EQ(p.give_up_line("rank 1 (pid 7) exited with status 3"), "");
}

TEST(RestartPolicy, AnInterruptedJobIsNotRestarted) {
  RestartPolicy p(restarts(3));
  EXPECT_FALSE(p.restart_after_failure(true));
  EXPECT_EQ(p.restarts(), 0);
}

TEST(RestartPolicy, LinesNameTheRestartTheFailureAndTheWait) {
  RestartPolicy p(restarts(3, 1500ms));
  ASSERT_TRUE(p.restart_after_failure(false));
  const std::string failure = "rank 1 (pid 42) " + failure_clause(ExitStatus{0, SIGKILL});
  EXPECT_EQ(p.restart_line(failure),
            "restart 1 of 3 after rank 1 (pid 42) was killed by signal 9 (SIGKILL); waiting 1.5 s");
  EXPECT_EQ(p.give_up_line("x exited with status 3"),
            "giving up after 1 restart; the last failure: x exited with status 3");
  EXPECT_EQ(failure_clause(ExitStatus{3, 0}), "exited with status 3");
}

TEST(RestartPolicy, RejectsNegativeRestartsAndLongBackoffs) {
  EXPECT_THROW(check_restart_options(restarts(-1), "launch"), ValueError);
  EXPECT_THROW(check_restart_options(restarts(1, std::chrono::hours(2)), "launch"), ValueError);
  EXPECT_NO_THROW(check_restart_options(restarts(5, 0ms), "launch"));
}

TEST(RestartPolicy, ASignalCutsTheBackoffShort) {
  ForwardedSignals signals;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(wait_backoff(30ms), 0);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 30ms);
  ::raise(SIGTERM);  // caught: only recorded
  EXPECT_EQ(wait_backoff(std::chrono::hours(1)), SIGTERM);
}

TEST(LaunchRestarts, ARankThatFailsOnceIsRestartedWithTheCount) {
  ScratchDir dir;
  LaunchOptions o;
  o.nproc = 2;
  o.restarts = restarts(2, 10ms);
  // Rank 1 fails on the first run only (no marker yet); every run prints its restart count.
  o.command = {"sh", "-c",
               "echo count=$MINITRAIN_RESTART_COUNT; test $RANK = 1 && ! test -e " + dir.path() +
                   "/m && touch " + dir.path() + "/m && exit 3; exit 0"};
  std::ostringstream out, err;
  EXPECT_EQ(launch(o, out, err), 0) << err.str();
  EXPECT_NE(err.str().find("restart 1 of 2 after rank 1 (pid "), std::string::npos) << err.str();
  EXPECT_NE(err.str().find(") exited with status 3; waiting 0.01 s"), std::string::npos);
  EXPECT_NE(out.str().find("[rank 0] count=0"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("[rank 1] count=1"), std::string::npos) << out.str();
  EXPECT_EQ(err.str().find("restart 2"), std::string::npos) << err.str();
}

TEST(LaunchRestarts, GivesUpAfterNRestartsWithTheRanksExitCode) {
  LaunchOptions o;
  o.nproc = 2;
  o.grace = 1s;
  o.restarts = restarts(2, 0ms);
  o.command = {"sh", "-c", "echo run; test $RANK = 1 && exit 5; sleep 30"};
  std::ostringstream out, err;
  EXPECT_EQ(launch(o, out, err), 5);
  EXPECT_NE(err.str().find("restart 2 of 2 after rank 1"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("giving up after 2 restarts; the last failure: rank 1 (pid "),
            std::string::npos)
      << err.str();
  EXPECT_EQ(err.str().find("restart 3"), std::string::npos);
}

TEST(LaunchRestarts, WithoutRestartsTheRanksGetNoCount) {
  LaunchOptions o;
  o.nproc = 1;
  o.command = {"sh", "-c", "echo count=${MINITRAIN_RESTART_COUNT-unset}"};
  std::ostringstream out, err;
  ::unsetenv(kRestartCountVariable);
  EXPECT_EQ(launch(o, out, err), 0);
  EXPECT_NE(out.str().find("count=unset"), std::string::npos) << out.str();
}

TEST(Supervise, RestartsAFailedCommandAndPassesItsOutputOn) {
  ScratchDir dir;
  SuperviseOptions o;
  o.restarts = restarts(3, 0ms);
  o.command = {"sh", "-c",
               "echo count=$MINITRAIN_RESTART_COUNT; test -e " + dir.path() + "/m || { touch " +
                   dir.path() + "/m; kill -9 $$; }"};
  std::ostringstream out, err;
  EXPECT_EQ(supervise(o, out, err), 0) << err.str();
  EXPECT_NE(out.str().find("count=0\ncount=1\n"), std::string::npos) << out.str();
  EXPECT_NE(err.str().find("restart 1 of 3 after the command (pid "), std::string::npos);
  EXPECT_NE(err.str().find(") was killed by signal 9 (SIGKILL); waiting 0 s"), std::string::npos)
      << err.str();
}

TEST(Supervise, GivesUpAfterNRestartsWithTheCommandsExitCode) {
  SuperviseOptions o;
  o.restarts = restarts(1, 0ms);
  o.command = {"sh", "-c", "exit 7"};
  std::ostringstream out, err;
  EXPECT_EQ(supervise(o, out, err), 7);
  EXPECT_NE(err.str().find("restart 1 of 1"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("giving up after 1 restart; the last failure: the command (pid "),
            std::string::npos)
      << err.str();
}

}  // namespace
}  // namespace minitrain
