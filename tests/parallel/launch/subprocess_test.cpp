// Subprocess: exit codes, signals, output through the pipe or a file, the environment, deadlines,
// stopping a child that ignores SIGTERM (and its own children), and programs that cannot start.

#include "parallel/launch/subprocess.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

Subprocess sh(const std::string& script,
              std::vector<std::pair<std::string, std::string>> env = {}) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", script};
  o.env = std::move(env);
  return Subprocess::start(o);
}

// Every line of output until the child closes its pipe (bounded, so a broken test cannot hang).
std::vector<std::string> all_lines(Subprocess& p) {
  std::vector<std::string> lines;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (p.output_fd() >= 0 && std::chrono::steady_clock::now() < deadline) {
    for (std::string& l : p.read_lines()) lines.push_back(std::move(l));
    std::this_thread::sleep_for(2ms);
  }
  return lines;
}

// Waits for the first line of output (a child saying it is ready).
std::string first_line(Subprocess& p) {
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < deadline) {
    auto lines = p.read_lines();
    if (!lines.empty()) return lines.front();
    std::this_thread::sleep_for(2ms);
  }
  return "(no line)";
}

TEST(Subprocess, ReportsExitCodes) {
  for (int code : {0, 1, 3, 255}) {
    Subprocess p = sh("exit " + std::to_string(code));
    const ExitStatus s = p.wait();
    EXPECT_EQ(s.code, code);
    EXPECT_EQ(s.signal, 0);
    EXPECT_EQ(s.ok(), code == 0);
    EXPECT_EQ(s.str(), "exit status " + std::to_string(code));
    EXPECT_EQ(p.poll()->code, code);  // the status stays once reaped
  }
}

TEST(Subprocess, ReportsTheKillingSignal) {
  Subprocess p = sh("kill -9 $$");
  const ExitStatus s = p.wait();
  EXPECT_EQ(s.signal, SIGKILL);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.str(), "signal 9 (Killed)");
  EXPECT_EQ((ExitStatus{0, SIGTERM}.str()), "signal 15 (Terminated)");
}

TEST(Subprocess, ReadsStdoutAndStderrAsLinesIncludingALastLineWithoutNewline) {
  Subprocess p = sh("echo one; echo two >&2; echo; printf 'three'");
  EXPECT_GE(p.output_fd(), 0);
  const auto lines = all_lines(p);
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "two", "", "three"}));
  EXPECT_EQ(p.output_fd(), -1);  // closed once the child closed its end
  EXPECT_TRUE(p.wait().ok());
  EXPECT_TRUE(p.read_lines().empty());
}

TEST(Subprocess, ReadsLongOutputWithoutLosingLines) {
  // More than a pipe's 64 KiB, so the child blocks until we read: the reader must keep up.
  Subprocess p = sh(
      "i=0; while [ $i -lt 5000 ]; do echo \"line $i with some padding text\"; i=$((i+1)); done");
  const auto lines = all_lines(p);
  ASSERT_EQ(lines.size(), 5000u);
  EXPECT_EQ(lines.front(), "line 0 with some padding text");
  EXPECT_EQ(lines.back(), "line 4999 with some padding text");
  EXPECT_TRUE(p.wait().ok());
}

TEST(Subprocess, StandardInputIsEmpty) {
  Subprocess p = sh("cat; echo done");  // would block (or stop, SIGTTIN) on a terminal or a pipe
  EXPECT_EQ(all_lines(p), (std::vector<std::string>{"done"}));
  EXPECT_TRUE(p.wait().ok());
}

// The child's niceness goes up by `nice` (field 19 of /proc/PID/stat, read by the child's shell).
TEST(Subprocess, RaisesTheChildsNiceness) {
  SubprocessOptions o;
  o.argv = {"sh", "-c", "read -r stat < /proc/$$/stat; set -- ${stat##*) }; echo ${17}"};
  const auto niceness = [&](int nice) {
    o.nice = nice;
    Subprocess p = Subprocess::start(o);
    const std::vector<std::string> lines = all_lines(p);
    EXPECT_TRUE(p.wait().ok());
    return lines.empty() ? std::string("?") : lines.front();
  };
  const std::string base = niceness(0);
  EXPECT_EQ(niceness(5), std::to_string(std::stoi(base) + 5));
}

TEST(Subprocess, PassesEnvironmentVariablesOverTheInheritedOnes) {
  ::setenv("MT_SUBPROCESS_TEST_INHERITED", "from parent", 1);
  ::setenv("MT_SUBPROCESS_TEST_OVERRIDDEN", "old", 1);
  Subprocess p =
      sh("echo "
         "\"$MT_SUBPROCESS_TEST_INHERITED|$MT_SUBPROCESS_TEST_OVERRIDDEN|$MT_SUBPROCESS_TEST_NEW\"",
         {{"MT_SUBPROCESS_TEST_OVERRIDDEN", "new"}, {"MT_SUBPROCESS_TEST_NEW", "a b=c"}});
  EXPECT_EQ(all_lines(p), (std::vector<std::string>{"from parent|new|a b=c"}));
  ::unsetenv("MT_SUBPROCESS_TEST_INHERITED");
  ::unsetenv("MT_SUBPROCESS_TEST_OVERRIDDEN");
}

TEST(Subprocess, AppendsOutputToAFileAndRunsInTheWorkingDirectory) {
  const std::string dir = ::testing::TempDir() + "subprocess_out_" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("mkdir -p '" + dir + "'").c_str()), 0);
  const std::string path = dir + "/out.log";
  { std::ofstream(path) << "before\n"; }
  SubprocessOptions o;
  o.argv = {"sh", "-c", "pwd; echo err >&2"};
  o.output_path = path;
  o.working_dir = dir;
  Subprocess p = Subprocess::start(o);
  EXPECT_EQ(p.output_fd(), -1);
  EXPECT_TRUE(p.wait().ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  char real[4096];
  ASSERT_NE(::realpath(dir.c_str(), real), nullptr);
  EXPECT_EQ(text.str(), "before\n" + std::string(real) + "\nerr\n");
}

TEST(Subprocess, WaitForReturnsNothingBeforeTheDeadlineThenTheStatus) {
  Subprocess p = sh("sleep 30");
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(p.wait_for(150ms).has_value());
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 150ms);
  EXPECT_FALSE(p.poll().has_value());
  p.signal(SIGTERM);
  const auto s = p.wait_for(10s);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->signal, SIGTERM);
  p.signal(SIGKILL);  // after the end: nothing, no error
  EXPECT_EQ(p.poll()->signal, SIGTERM);
}

TEST(Subprocess, TerminateKillsAChildThatIgnoresSigtermAndItsChildren) {
  // The shell ignores TERM (and so does the sleep it starts); only the SIGKILL after the grace ends
  // them.
  Subprocess p = sh("trap '' TERM; sleep 60 & echo $!; wait; wait; wait");
  const std::string grandchild = first_line(p);
  ASSERT_NE(grandchild, "(no line)");
  const int grandchild_pid = std::stoi(grandchild);
  const auto t0 = std::chrono::steady_clock::now();
  const ExitStatus s = p.terminate(300ms);
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(s.signal, SIGKILL) << s.str();
  EXPECT_GE(took, 300ms);  // it had its grace
  EXPECT_TRUE(becomes_gone(grandchild_pid, 10s))
      << "pid " << grandchild_pid << " survived the process group's SIGKILL";
}

// A stopped child acts on SIGTERM only once continued: without the SIGCONT it would hold out for
// the whole grace and need SIGKILL.
TEST(Subprocess, TerminateEndsAStoppedChildWithSigterm) {
  Subprocess p = sh("echo ready; kill -STOP $$; sleep 60");
  ASSERT_EQ(first_line(p), "ready");
  const auto t0 = std::chrono::steady_clock::now();
  const ExitStatus s = p.terminate(30s);
  EXPECT_EQ(s.signal, SIGTERM) << s.str();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s) << "the stopped child sat out its grace";
}

// What a child leaves running in its process group goes when the child has ended too: through
// signal() (the group outlives its leader) and the destructor.
TEST(Subprocess, WhatAnEndedChildLeftInItsGroupIsKilled) {
  int signalled = -1, destroyed = -1;
  {
    Subprocess p = sh("sleep 60 & echo $!; exec sleep 60 >/dev/null 2>&1 </dev/null");
    Subprocess q = sh("sleep 60 >/dev/null 2>&1 </dev/null & echo $!");
    signalled = std::stoi(first_line(p));
    destroyed = std::stoi(first_line(q));
    ASSERT_TRUE(q.wait_for(20s).has_value());  // q ended, its sleep runs on
    EXPECT_FALSE(process_gone(destroyed));
    ::kill(p.pid(), SIGKILL);  // the leader alone
    ASSERT_TRUE(p.wait_for(20s).has_value());
    EXPECT_FALSE(process_gone(signalled));
    p.signal(SIGKILL);  // to the group, after its leader ended
    EXPECT_TRUE(becomes_gone(signalled, 10s))
        << "pid " << signalled << " survived a signal to its group";
  }
  EXPECT_TRUE(becomes_gone(destroyed, 10s))
      << "pid " << destroyed << " survived the destructor of its group's Subprocess";
}

TEST(Subprocess, NamesSignals) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(0), "signal 0");
}

TEST(Subprocess, TerminateEndsACooperativeChildWithSigterm) {
  Subprocess p = sh("echo ready; sleep 60");
  ASSERT_EQ(first_line(p), "ready");
  EXPECT_EQ(p.terminate(10s).signal, SIGTERM);
}

TEST(Subprocess, DestructorKillsAndReapsARunningChild) {
  int pid = -1;
  {
    Subprocess p = sh("sleep 60");
    pid = p.pid();
    Subprocess moved = std::move(p);  // ownership moves; only one of them reaps
    EXPECT_EQ(moved.pid(), pid);
  }
  errno = 0;
  EXPECT_EQ(::kill(pid, 0), -1);  // reaped by us: no zombie left behind
  EXPECT_EQ(errno, ESRCH);
}

TEST(Subprocess, MoveAssignmentStopsTheChildItReplaces) {
  Subprocess a = sh("sleep 60");
  const int first = a.pid();
  a = sh("exit 4");
  EXPECT_EQ(::kill(first, 0), -1);
  EXPECT_EQ(a.wait().code, 4);
}

TEST(Subprocess, NamesAProgramThatCannotStart) {
  SubprocessOptions o;
  o.argv = {"minitrain-no-such-program", "--flag"};
  EXPECT_THROW(Subprocess::start(o), IoError);
  const std::string msg = error_message([&] { Subprocess::start(o); });
  EXPECT_NE(msg.find("cannot run 'minitrain-no-such-program': No such file or directory"),
            std::string::npos)
      << msg;

  const std::string not_executable =
      ::testing::TempDir() + "not_executable_" + std::to_string(::getpid());
  { std::ofstream(not_executable) << "exit 0\n"; }  // mode 0644: exists, but may not be run
  o.argv = {not_executable};
  const std::string denied = error_message([&] { Subprocess::start(o); });
  EXPECT_NE(denied.find("cannot run '" + not_executable + "': Permission denied"),
            std::string::npos)
      << denied;
  std::remove(not_executable.c_str());

  o.argv = {"true"};
  o.working_dir = "/nonexistent/dir";
  const std::string dir = error_message([&] { Subprocess::start(o); });
  EXPECT_NE(
      dir.find("cannot enter the working directory '/nonexistent/dir': No such file or directory"),
      std::string::npos)
      << dir;

  o.working_dir.clear();
  o.output_path = "/nonexistent/dir/out.log";
  const std::string out = error_message([&] { Subprocess::start(o); });
  EXPECT_NE(out.find("cannot open its output file '/nonexistent/dir/out.log'"), std::string::npos)
      << out;

  EXPECT_THROW(Subprocess::start(SubprocessOptions{}), ValueError);
  SubprocessOptions bad_env;
  bad_env.argv = {"true"};
  bad_env.env = {{"A=B", "x"}};
  EXPECT_NE(error_message([&] { Subprocess::start(bad_env); }).find("'A=B'"), std::string::npos);
}

TEST(Subprocess, SelfExecutableAndResidentMemory) {
  const std::string self = self_executable();
  EXPECT_EQ(self.front(), '/');
  EXPECT_NE(self.find("minitrain_process_tests"), std::string::npos) << self;
  EXPECT_GT(process_rss_bytes(::getpid()), 1024u * 1024u);  // a gtest binary uses more than 1 MiB
  Subprocess p = sh("exit 0");
  const int pid = p.pid();
  p.wait();
  EXPECT_EQ(process_rss_bytes(pid), 0u);
}

}  // namespace
}  // namespace minitrain
