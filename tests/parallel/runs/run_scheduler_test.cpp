// The scheduler of independent runs (`minitrain pipelines`): queueing by device, GPU pinning,
// failure isolation and interruption with fake processes (no children, exact event order), then the
// same paths with real /bin/sh children, and the run-file readers and summaries.

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "parallel/runs/run_scheduler.h"
#include "tools/runs_table.h"

namespace minitrain {
namespace {

namespace fs = std::filesystem;

// ---- fake processes: argv = {"fake", NAME, POLLS, EXIT_CODE}; NAME "throw" cannot start ----

struct FakeWorld {
  std::vector<std::string> events;  // "start a", "end a", "terminate a"
  std::vector<SubprocessOptions> started;
  std::map<std::string, std::string> device_env;  // CUDA_VISIBLE_DEVICES by run ("" when unset)
  int running = 0, max_running = 0;
};

class FakeProcess : public RunningProcess {
 public:
  FakeProcess(FakeWorld& w, std::string name, int polls, int code)
      : w_(w), name_(std::move(name)), polls_(polls), code_(code) {}
  int pid() const override { return -1; }
  std::optional<ExitStatus> poll() override {
    if (ended_) return status_;
    if (--polls_ > 0) return std::nullopt;
    end(ExitStatus{code_, 0});
    return status_;
  }
  ExitStatus terminate(std::chrono::milliseconds) override {
    w_.events.push_back("terminate " + name_);
    if (!ended_) end(ExitStatus{0, SIGTERM});
    return status_;
  }

 private:
  void end(ExitStatus st) {
    ended_ = true;
    status_ = st;
    --w_.running;
    w_.events.push_back("end " + name_);
  }
  FakeWorld& w_;
  std::string name_;
  int polls_, code_;
  bool ended_ = false;
  ExitStatus status_;
};

ProcessStarter fake_starter(FakeWorld& w) {
  return [&w](const SubprocessOptions& o) -> std::unique_ptr<RunningProcess> {
    if (o.argv.at(1) == "throw")
      MT_THROW(IoError, "cannot run 'nowhere': No such file or directory");
    w.started.push_back(o);
    w.events.push_back("start " + o.argv[1]);
    std::string gpu;
    for (const auto& [k, v] : o.env)
      if (k == "CUDA_VISIBLE_DEVICES") gpu = v;
    w.device_env[o.argv[1]] = gpu;
    w.max_running = std::max(w.max_running, ++w.running);
    return std::make_unique<FakeProcess>(w, o.argv[1], std::stoi(o.argv[2]), std::stoi(o.argv[3]));
  };
}

RunJob fake_job(const std::string& name, const std::string& device, int polls = 3, int code = 0) {
  RunJob j;
  j.name = name;
  j.device = device;
  j.argv = {"fake", name, std::to_string(polls), std::to_string(code)};
  j.output_path = "/nonexistent/pipelines/" + name + "/output.log";
  j.metrics_path = "/nonexistent/pipelines/" + name + "/metrics.jsonl";
  return j;
}

RunsOptions fast(int cpu_slots, int gpus) {
  RunsOptions o;
  o.cpu_slots = cpu_slots;
  o.gpu_count = gpus;
  o.poll_every = std::chrono::milliseconds(1);
  o.status_every = std::chrono::hours(1);
  return o;
}

std::vector<RunResult> run_fake(FakeWorld& w, const std::vector<RunJob>& jobs, const RunsOptions& o,
                                std::ostream* status = nullptr,
                                const std::function<bool()>& stop = {}) {
  std::ostringstream sink;
  return schedule_runs(jobs, o, fake_starter(w), status ? *status : sink, stop);
}

TEST(RunScheduler, OneCpuSlotRunsCpuRunsOneAfterAnotherInFileOrder) {
  FakeWorld w;
  const auto r = run_fake(
      w, {fake_job("a", "cpu", 3), fake_job("b", "cpu", 1), fake_job("c", "cpu", 2)}, fast(1, 0));
  EXPECT_EQ(w.max_running, 1);
  EXPECT_EQ(w.events,
            (std::vector<std::string>{"start a", "end a", "start b", "end b", "start c", "end c"}));
  ASSERT_EQ(r.size(), 3u);
  for (const RunResult& x : r) {
    EXPECT_TRUE(x.ok()) << x.name << ": " << x.reason;
    EXPECT_EQ(x.device, "cpu");
    EXPECT_EQ(x.exit_status, "exit status 0");
    EXPECT_GT(x.start_time, 0);
    EXPECT_GE(x.end_time, x.start_time);
  }
  EXPECT_LE(r[0].end_time, r[1].start_time);  // recorded times show the queue too
  EXPECT_LE(r[1].end_time, r[2].start_time);
}

// Waiting runs start by priority, highest first, file order among equals; the nice value goes to
// the child and the priority to the summary.
TEST(RunScheduler, HigherPriorityRunsStartFirst) {
  FakeWorld w;
  std::vector<RunJob> jobs{fake_job("a", "cpu", 2), fake_job("b", "cpu", 2),
                           fake_job("c", "cpu", 2), fake_job("d", "cpu", 2)};
  jobs[1].priority = 5;
  jobs[2].priority = -1;
  jobs[2].nice = 1;
  jobs[3].priority = 5;
  const auto r = run_fake(w, jobs, fast(1, 0));
  EXPECT_EQ(w.events[0], "start b");
  std::vector<std::string> starts;
  for (const std::string& e : w.events)
    if (e.rfind("start ", 0) == 0) starts.push_back(e.substr(6));
  EXPECT_EQ(starts, (std::vector<std::string>{"b", "d", "a", "c"}));
  for (const SubprocessOptions& o : w.started) EXPECT_EQ(o.nice, o.argv[1] == "c" ? 1 : 0);
  EXPECT_NE(runs_summary_json(r).find("\"priority\": 5"), std::string::npos);
}

TEST(RunScheduler, TwoCpuSlotsRunTwoAtOnce) {
  FakeWorld w;
  const auto r = run_fake(
      w, {fake_job("a", "cpu", 5), fake_job("b", "cpu", 5), fake_job("c", "cpu", 5)}, fast(2, 0));
  EXPECT_EQ(w.max_running, 2);
  ASSERT_GE(w.events.size(), 3u);
  EXPECT_EQ(w.events[0], "start a");
  EXPECT_EQ(w.events[1], "start b");
  EXPECT_EQ(w.events[2].rfind("end ", 0), 0u) << "c started before a slot was free";
  for (const RunResult& x : r) EXPECT_TRUE(x.ok()) << x.name;
}

TEST(RunScheduler, GpuRunsArePinnedOnePerGpuAndCpuRunsDoNotWaitForThem) {
  FakeWorld w;
  // cuda:1 takes GPU 1; the next "cuda" takes GPU 0; the third GPU run waits for one; the CPU
  // run behind them starts at once.
  const auto r = run_fake(w,
                          {fake_job("g1", "cuda:1", 4), fake_job("any1", "cuda", 8),
                           fake_job("any2", "cuda", 2), fake_job("c", "cpu", 2)},
                          fast(1, 2));
  EXPECT_EQ(w.device_env["g1"], "1");
  EXPECT_EQ(w.device_env["any1"], "0");
  EXPECT_EQ(w.device_env["any2"], "1");  // GPU 1 frees first (g1 ends before any1)
  EXPECT_EQ(w.device_env["c"], "");      // a CPU run is not pinned to a GPU
  EXPECT_EQ(w.events[0], "start g1");
  EXPECT_EQ(w.events[1], "start any1");
  EXPECT_EQ(w.events[2], "start c");
  const auto pos = [&](const std::string& e) {
    return std::find(w.events.begin(), w.events.end(), e) - w.events.begin();
  };
  EXPECT_LT(pos("end g1"), pos("start any2"));
  EXPECT_EQ(r[0].device, "cuda:1");
  EXPECT_EQ(r[1].device, "cuda:0");
  EXPECT_EQ(r[2].device, "cuda:1");
  EXPECT_EQ(r[3].device, "cpu");
  for (const RunResult& x : r) EXPECT_TRUE(x.ok()) << x.name;
}

TEST(RunScheduler, AFailingRunDoesNotStopTheOthers) {
  FakeWorld w;
  RunJob setup = fake_job("setup", "cpu");
  setup.setup_error = "run 'setup': runs.toml:7: unknown key 'lerning-rate' (did you mean 'lr'?)";
  const auto r = run_fake(
      w,
      {fake_job("a", "cpu", 2), fake_job("bad", "cpu", 2, 3), fake_job("throw", "cpu"), setup,
       fake_job("gpu", "cuda"), fake_job("gpu9", "cuda:9"), fake_job("z", "cpu", 2)},
      fast(1, 0));
  ASSERT_EQ(r.size(), 7u);
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[1].state, RunState::Failed);
  EXPECT_EQ(r[1].exit_status, "exit status 3");
  EXPECT_EQ(r[1].reason, "exit status 3");  // no output file to name a reason: the status says it
  EXPECT_EQ(r[2].state, RunState::Failed);
  EXPECT_EQ(r[2].exit_status, "not started");
  EXPECT_EQ(r[2].reason, "cannot start: cannot run 'nowhere': No such file or directory");
  EXPECT_EQ(r[3].reason, setup.setup_error);
  EXPECT_EQ(r[3].start_time, 0);
  EXPECT_EQ(r[4].reason,
            "device 'cuda' but this machine has no usable GPU; use device = \"cpu\" (or \"auto\")");
  EXPECT_EQ(
      r[5].reason,
      "device 'cuda:9' but this machine has no usable GPU; use device = \"cpu\" (or \"auto\")");
  EXPECT_TRUE(r[6].ok());
  EXPECT_EQ(w.events, (std::vector<std::string>{"start a", "end a", "start bad", "end bad",
                                                "start z", "end z"}));
}

TEST(RunScheduler, AGpuIndexBeyondTheMachineFails) {
  FakeWorld w;
  const auto r = run_fake(w, {fake_job("g", "cuda:2"), fake_job("ok", "cuda:1")}, fast(1, 2));
  EXPECT_EQ(r[0].reason, "device 'cuda:2' but this machine has 2 GPU(s) (cuda:0..cuda:1)");
  EXPECT_TRUE(r[1].ok());
}

TEST(RunScheduler, AStopRequestTerminatesRunningRunsAndFailsQueuedOnes) {
  FakeWorld w;
  int calls = 0;
  const auto r = run_fake(w, {fake_job("long", "cpu", 1000000), fake_job("queued", "cpu")},
                          fast(1, 0), nullptr, [&] { return ++calls > 5; });
  EXPECT_EQ(w.events, (std::vector<std::string>{"start long", "terminate long", "end long"}));
  EXPECT_EQ(r[0].state, RunState::Failed);
  EXPECT_EQ(r[0].reason, "interrupted");
  EXPECT_EQ(r[0].exit_status, "signal 15 (Terminated)");
  EXPECT_EQ(r[1].reason, "interrupted before it started");
  EXPECT_EQ(r[1].exit_status, "not started");
}

// Each run's files are made when it starts (issue 30): a run that never starts (queued when the
// stop came, refused for its device, or its setup failed) never has prepare() called; a prepare
// that throws fails its run as not started, and the others go on.
TEST(RunScheduler, ARunIsPreparedJustBeforeItStartsAndOnlyThen) {
  FakeWorld w;
  std::vector<std::string> prepared;
  std::vector<RunJob> jobs = {fake_job("first", "cpu"), fake_job("refused", "cuda:3"),
                              fake_job("broken", "cpu"), fake_job("cannot", "cpu"),
                              fake_job("second", "cpu")};
  jobs[2].setup_error = "a bad key";
  for (RunJob& j : jobs)
    j.prepare = [&w, &prepared, name = j.name] {
      prepared.push_back(name + " after " + std::to_string(w.events.size()) + " events");
      if (name == "cannot") MT_THROW(IoError, "cannot create the directory 'x': Read-only");
    };
  const auto r = run_fake(w, jobs, fast(1, 0));
  // One slot: "second" is prepared only once "first" has ended (start first, end first).
  EXPECT_EQ(prepared, (std::vector<std::string>{"first after 0 events", "cannot after 2 events",
                                                "second after 2 events"}));
  EXPECT_TRUE(r[0].ok());
  EXPECT_EQ(r[1].exit_status, "not started");
  EXPECT_EQ(r[2].exit_status, "not started");
  EXPECT_EQ(r[3].exit_status, "not started");
  EXPECT_EQ(r[3].reason, "cannot start: cannot create the directory 'x': Read-only");
  EXPECT_TRUE(r[4].ok());

  // Interrupted while queued: never prepared.
  prepared.clear();
  int calls = 0;
  std::vector<RunJob> two = {fake_job("long", "cpu", 1000000), fake_job("queued", "cpu")};
  for (RunJob& j : two) j.prepare = [&prepared, name = j.name] { prepared.push_back(name); };
  FakeWorld w2;
  run_fake(w2, two, fast(1, 0), nullptr, [&] { return ++calls > 5; });
  EXPECT_EQ(prepared, (std::vector<std::string>{"long"}));
}

TEST(RunScheduler, OnATerminalTheStatusTableIsRedrawnInPlace) {
  FakeWorld w;
  RunsOptions o = fast(1, 0);
  std::ostringstream status;
  o.draw_status = live_runs_table(status);
  o.status_every = std::chrono::milliseconds(1);
  const auto r = run_fake(w, {fake_job("a", "cpu", 20), fake_job("b", "cpu", 20)}, o, &status);
  const std::string s = status.str();
  EXPECT_EQ(s.rfind("run  state", 0), 0u) << s;  // the first table is drawn as is
  EXPECT_NE(s.find("\033[3A\033[J"), std::string::npos)
      << s;                                                  // then up over its 3 lines and cleared
  EXPECT_EQ(s.find("[a] started"), std::string::npos) << s;  // no event lines between tables
  // The last table shows the final states.
  const std::string last = s.substr(s.rfind("\033[J") + 3);
  EXPECT_NE(last.find("a    done"), std::string::npos) << last;
  EXPECT_NE(last.find("b    done"), std::string::npos) << last;
  EXPECT_TRUE(r[0].ok() && r[1].ok());
}

TEST(RunScheduler, RejectsZeroCpuSlots) {
  FakeWorld w;
  std::ostringstream sink;
  EXPECT_THROW(schedule_runs({fake_job("a", "cpu")}, fast(0, 0), fake_starter(w), sink),
               ValueError);
}

// ---- run files ----

struct TempDir {
  TempDir() {
    path = fs::path(::testing::TempDir()) /
           ("pipelines_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
  fs::path path;
};

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(RunFiles, ProgressComesFromTheLastCompleteMetricsLineAndTheLastProgressLine) {
  TempDir t;
  write(t.file("m.jsonl"),
        "{\"step\":1,\"epoch\":1,\"loss\":2.5,\"lr\":0.1,\"step_ms\":1.5,\"device\":\"cpu\","
        "\"memory_in_use_bytes\":10}\n"
        "{\"step\":2,\"epoch\":1,\"loss\":1.25,\"lr\":0.1,\"step_ms\":0.75,\"device\":\"cuda:0\","
        "\"memory_in_use_bytes\":4096}\n"
        "{\"step\":3,\"epo");  // being written
  write(
      t.file("out.log"),
      "training ...\nstep 1/40 (2%)  epoch 1  loss 2.5\nstep 2/40 (5%)  epoch 1  loss 1.25\nwarn");
  const RunProgress p = read_run_progress(t.file("m.jsonl"), t.file("out.log"));
  EXPECT_EQ(p.step, 2);
  EXPECT_EQ(p.total_steps, 40);
  ASSERT_TRUE(p.loss.has_value());
  EXPECT_DOUBLE_EQ(*p.loss, 1.25);
  EXPECT_DOUBLE_EQ(p.step_ms, 0.75);
  EXPECT_EQ(p.device, "cuda:0");
  EXPECT_EQ(p.device_memory, 4096u);
  EXPECT_FALSE(p.cpu_utilization.has_value());  // a log from before the field
  EXPECT_EQ(run_cpu_text(p), "-");
  write(t.file("m.jsonl"),
        "{\"step\":2,\"loss\":1,\"cpu_utilization\":1.5,\"gpu_utilization_pct\":87,"
        "\"gpu_memory_used_bytes\":2147483648}\n");
  const RunProgress busy = read_run_progress(t.file("m.jsonl"), t.file("out.log"));
  EXPECT_DOUBLE_EQ(*busy.cpu_utilization, 1.5);
  EXPECT_EQ(run_cpu_text(busy), "1.50  gpu 87%  gpu mem 2.00 GiB");

  const RunProgress none = read_run_progress(t.file("missing.jsonl"), t.file("missing.log"));
  EXPECT_EQ(none.step, 0);
  EXPECT_EQ(none.total_steps, 0);
  EXPECT_FALSE(none.loss.has_value());
}

// A diverged run logs a null loss with the value spelled out ("inf"), and every line carries the
// process's own peak host memory, which a run that has ended still reports.
TEST(RunFiles, ANonFiniteLossKeepsItsValueAndTheHostPeakIsRead) {
  TempDir t;
  write(t.file("m.jsonl"),
        "{\"step\":1,\"loss\":0.5,\"host_memory_peak_bytes\":1048576}\n"
        "{\"step\":2,\"loss\":null,\"loss_nonfinite\":\"inf\",\"host_memory_peak_bytes\":"
        "2097152}\n");
  write(t.file("out.log"), "");
  const RunProgress p = read_run_progress(t.file("m.jsonl"), t.file("out.log"));
  ASSERT_TRUE(p.loss.has_value());
  EXPECT_EQ(*p.loss, std::numeric_limits<double>::infinity());
  EXPECT_EQ(p.host_memory_peak, 2097152u);
  write(t.file("m.jsonl"), "{\"step\":1,\"loss\":null,\"loss_nonfinite\":\"-inf\"}\n");
  EXPECT_EQ(*read_run_progress(t.file("m.jsonl"), t.file("out.log")).loss,
            -std::numeric_limits<double>::infinity());
  write(t.file("m.jsonl"), "{\"step\":1,\"loss\":null}\n");  // an older log: NaN
  EXPECT_TRUE(std::isnan(*read_run_progress(t.file("m.jsonl"), t.file("out.log")).loss));

  RunResult diverged;
  diverged.name = "hot";
  diverged.final_loss = std::numeric_limits<double>::infinity();
  const nlohmann::json j = nlohmann::json::parse(runs_summary_json({diverged}));
  EXPECT_TRUE(j["runs"][0]["final_loss"].is_null());
  EXPECT_EQ(j["runs"][0]["final_loss_nonfinite"], "inf");
}

TEST(RunFiles, FailureReasonIsTheLastErrorLine) {
  TempDir t;
  write(t.file("a.log"),
        "training mlp\nminitrain: error: cannot open '/x.npy': No such file\nbye\n");
  EXPECT_EQ(failure_reason(t.file("a.log")),
            "minitrain: error: cannot open '/x.npy': No such file");
  write(t.file("b.log"), "first\nlast words\n\n");
  EXPECT_EQ(failure_reason(t.file("b.log")), "last words");
  EXPECT_EQ(failure_reason(t.file("none.log")), "");
}

// A run killed from outside (the OOM killer, a user's kill -9) last printed progress, which says
// nothing of why it ended: the signal is the reason, and an error line it printed is kept after it.
TEST(RunFiles, ARunKilledByASignalIsReportedAsKilledByIt) {
  TempDir t;
  write(t.file("progress.log"), "training mlp\nstep 3/10 loss 0.5\n");
  EXPECT_EQ(failure_reason(t.file("progress.log"), ExitStatus{0, SIGKILL}),
            "killed by signal 9 (SIGKILL)");
  write(t.file("error.log"), "minitrain: error: out of host memory\nstep 3/10 loss 0.5\n");
  EXPECT_EQ(
      failure_reason(t.file("error.log"), ExitStatus{0, SIGSEGV}),
      "killed by signal 11 (SIGSEGV); its last error line: minitrain: error: out of host memory");
  // An exit code keeps the plain rule, and the status when the output is silent.
  EXPECT_EQ(failure_reason(t.file("progress.log"), ExitStatus{3, 0}), "step 3/10 loss 0.5");
  EXPECT_EQ(failure_reason(t.file("none.log"), ExitStatus{3, 0}), "exit status 3");
}

TEST(RunsSummary, JsonAndTableNameEveryRunAndTheFailures) {
  RunResult ok;
  ok.name = "good";
  ok.device = "cpu";
  ok.state = RunState::Done;
  ok.exit_status = "exit status 0";
  ok.exit_code = 0;
  ok.final_loss = 0.125;
  ok.outcome.epoch_loss = 0.25;
  ok.steps = 12;
  ok.seconds = 1.5;
  ok.start_time = 1000.0;
  ok.end_time = 1001.5;
  RunResult bad;
  bad.name = "broken";
  bad.device = "cpu";
  bad.state = RunState::Failed;
  bad.exit_status = "exit status 1";
  bad.exit_code = 1;
  RunResult killed;
  killed.name = "killed";
  killed.state = RunState::Failed;
  killed.exit_status = "signal 9 (Killed)";
  killed.signal = 9;
  bad.reason = "minitrain: error: boom";
  TempDir t;
  write_runs_summary(t.file("summary.json"), {ok, bad, killed});
  std::ifstream in(t.file("summary.json"));
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["failed"], 2);
  ASSERT_EQ(j["runs"].size(), 3u);
  EXPECT_EQ(j["runs"][0]["name"], "good");
  EXPECT_EQ(j["runs"][0]["status"], "ok");
  EXPECT_DOUBLE_EQ(j["runs"][0]["final_loss"].get<double>(), 0.125);
  EXPECT_EQ(j["runs"][0]["steps"], 12);
  EXPECT_DOUBLE_EQ(j["runs"][0]["end_time"].get<double>(), 1001.5);
  EXPECT_EQ(j["runs"][1]["status"], "failed");
  EXPECT_TRUE(j["runs"][1]["final_loss"].is_null());
  EXPECT_EQ(j["runs"][1]["reason"], "minitrain: error: boom");
  // Issue 30: the exit status as a number beside its words (null where a signal ended the run).
  EXPECT_EQ(j["runs"][0]["exit_code"], 0);
  EXPECT_EQ(j["runs"][1]["exit_code"], 1);
  EXPECT_TRUE(j["runs"][1]["signal"].is_null());
  EXPECT_TRUE(j["runs"][2]["exit_code"].is_null());
  EXPECT_EQ(j["runs"][2]["signal"], 9);

  const std::string table = runs_summary_table({ok, bad});
  EXPECT_NE(table.find("good"), std::string::npos) << table;
  EXPECT_NE(table.find("0.125"), std::string::npos) << table;
  // Issue 30: the final loss is summary.json's final_loss, beside the epoch's mean, each named.
  EXPECT_NE(table.find("final loss"), std::string::npos) << table;
  EXPECT_NE(table.find("epoch loss"), std::string::npos) << table;
  EXPECT_NE(table.find("0.25"), std::string::npos) << table;
  EXPECT_NE(table.find("broken: minitrain: error: boom"), std::string::npos) << table;
  EXPECT_NE(table.find("1 of 2 run(s) ok, 1 failed"), std::string::npos) << table;
}

// ---- real children (/bin/sh) through subprocess_starter ----

RunJob sh_job(const TempDir& t, const std::string& name, const std::string& script) {
  RunJob j;
  j.name = name;
  j.device = "cpu";
  j.argv = {"/bin/sh", "-c", script};
  j.output_path = t.file(name + ".log");
  j.metrics_path = t.file(name + ".jsonl");
  return j;
}

std::vector<RunResult> run_sh(const std::vector<RunJob>& jobs, int cpu_slots, std::ostream& status,
                              const std::function<bool()>& stop = {}) {
  RunsOptions o;
  o.cpu_slots = cpu_slots;
  o.poll_every = std::chrono::milliseconds(5);
  o.status_every = std::chrono::milliseconds(20);
  o.terminate_grace = std::chrono::milliseconds(2000);
  return schedule_runs(jobs, o, subprocess_starter(), status, stop);
}

bool overlap(const RunResult& a, const RunResult& b) {
  return a.start_time < b.end_time && b.start_time < a.end_time;
}

TEST(RunsProcesses, RealRunsQueueOnOneSlotAndOverlapOnTwo) {
  TempDir t;
  const std::string good =
      "sleep 0.4; echo '{\"step\":5,\"loss\":0.25,\"step_ms\":2.0}' > " + t.file("a.jsonl");
  std::ostringstream status;
  {
    const auto r = run_sh({sh_job(t, "a", good), sh_job(t, "b", "sleep 0.4")}, 1, status);
    ASSERT_TRUE(r[0].ok()) << r[0].reason;
    ASSERT_TRUE(r[1].ok()) << r[1].reason;
    EXPECT_FALSE(overlap(r[0], r[1])) << r[0].start_time << "-" << r[0].end_time << " vs "
                                      << r[1].start_time << "-" << r[1].end_time;
    EXPECT_GE(r[0].seconds, 0.35);
    ASSERT_TRUE(r[0].final_loss.has_value());
    EXPECT_DOUBLE_EQ(*r[0].final_loss, 0.25);
    EXPECT_EQ(r[0].steps, 5);
  }
  {
    const auto r = run_sh({sh_job(t, "a", good), sh_job(t, "b", "sleep 0.4")}, 2, status);
    ASSERT_TRUE(r[0].ok() && r[1].ok());
    EXPECT_TRUE(overlap(r[0], r[1]));
  }
  EXPECT_NE(status.str().find("[a] started on cpu (pid "), std::string::npos) << status.str();
  EXPECT_NE(status.str().find("[b] done (exit status 0)"), std::string::npos) << status.str();
}

TEST(RunsSummary, AReasonThatIsNotUtf8BecomesReplacementCharacters) {
  // A run's error line quoting a path with a stray byte used to throw json type_error 316.
  RunResult bad;
  bad.name = "a";
  bad.state = RunState::Failed;
  bad.reason = "minitrain: error: cannot open '/data/x\xff.npy'";
  const nlohmann::json j = nlohmann::json::parse(runs_summary_json({bad}));
  EXPECT_EQ(j["runs"][0]["reason"], "minitrain: error: cannot open '/data/x\xef\xbf\xbd.npy'");
}

TEST(RunsProcesses, AFailingChildIsReportedWithItsErrorLineAndTheOthersFinish) {
  TempDir t;
  std::ostringstream status;
  const auto r = run_sh(
      {sh_job(t, "bad", "echo starting; echo 'minitrain: error: no such file x.npy' >&2; exit 3"),
       sh_job(t, "good", "echo fine")},
      1, status);
  EXPECT_EQ(r[0].state, RunState::Failed);
  EXPECT_EQ(r[0].exit_status, "exit status 3");
  EXPECT_EQ(r[0].reason, "minitrain: error: no such file x.npy");
  EXPECT_TRUE(r[1].ok());
  std::ifstream log(t.file("good.log"));
  std::string line;
  std::getline(log, line);
  EXPECT_EQ(line, "fine");  // stdout went to the run's own file
  EXPECT_NE(status.str().find("[bad] failed (exit status 3) after"), std::string::npos)
      << status.str();
}

TEST(RunsProcesses, ARealChildKilledByASignalIsReportedAsKilled) {
  TempDir t;
  std::ostringstream status;
  const auto r = run_sh({sh_job(t, "killed", "echo 'step 3/10 loss 0.5'; kill -9 $$")}, 1, status);
  EXPECT_EQ(r[0].state, RunState::Failed);
  EXPECT_EQ(r[0].exit_status, "signal 9 (Killed)");
  EXPECT_EQ(r[0].reason, "killed by signal 9 (SIGKILL)");
  EXPECT_NE(status.str().find("[killed] failed (signal 9 (Killed)) after"), std::string::npos)
      << status.str();
}

TEST(RunsProcesses, AStopRequestTerminatesARealChild) {
  TempDir t;
  std::ostringstream status;
  const auto begin = std::chrono::steady_clock::now();
  const auto r = run_sh(
      {sh_job(t, "sleeper",
              "echo '{\"step\":1,\"loss\":1.5}' > " + t.file("sleeper.jsonl") + "; exec sleep 30")},
      1, status,
      [&] { return std::chrono::steady_clock::now() - begin > std::chrono::milliseconds(300); });
  EXPECT_EQ(r[0].state, RunState::Failed);
  EXPECT_EQ(r[0].reason, "interrupted");
  EXPECT_EQ(r[0].exit_status, "signal 15 (Terminated)");
  EXPECT_LT(r[0].seconds, 10.0);
  // The live status saw the run's metrics while it ran.
  EXPECT_NE(status.str().find("[sleeper] running on cpu  step 1/?  loss 1.5"), std::string::npos)
      << status.str();
}

}  // namespace
}  // namespace minitrain
