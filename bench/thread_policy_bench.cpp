// The large-layer training step (bench/large_step.h: mlp:256,1024,1024,1, batch 256, Adam) under
// each way minitrain's OpenMP threads can wait between parallel regions, on an idle machine and
// with a background load on every core: the figure behind Note [passive thread waiting] in
// core/thread_policy.h (issue 16: "a thread policy that does not collapse when the machine is
// loaded").
//
// libgomp reads OMP_WAIT_POLICY and GOMP_SPINCOUNT once, when it is loaded, so each policy runs
// in a child: this program starts itself again (/proc/self/exe --child-steps=N) with the policy's
// environment, the child times N steps after two untimed ones and writes the seconds to a pipe.
// A case's iteration is one child; its time is the child's mean step time (manual time), so
// process start-up and the model's construction are not in it. The background load, for the
// loaded/ cases, is one busy process per core the bench may use (core/thread_policy.h's
// available_cores), started before the case's first child and killed after its last.
//
// Policies: passive (OMP_WAIT_POLICY=passive: sleep at once), active (spin until work comes),
// libgomp_default (neither variable set: spin about 300000 times, then sleep), minitrain (what
// the minitrain command runs with: thread_wait_environment()). Counter x_passive: this policy's
// step time over passive's in the same condition of the same run (the reference).
//
//   minitrain_thread_policy_bench [--threads=N] [--steps=N] [--benchmark_filter=loaded]

#include <benchmark/benchmark.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "bench/bench_main.h"
#include "bench/large_step.h"
#include "core/parallel_for.h"
#include "core/thread_policy.h"

extern char** environ;

namespace {

struct Policy {
  std::string name;
  std::vector<std::pair<std::string, std::string>> env;  // set in the child; the rest unset
};

std::vector<Policy> policies() {
  return {{"passive", {{"OMP_WAIT_POLICY", "passive"}}},
          {"active", {{"OMP_WAIT_POLICY", "active"}}},
          {"libgomp_default", {}},
          {"minitrain", minitrain::thread_wait_environment()}};
}

// ---- the child: time the step ----

int run_child(int steps) {
  minitrain::bench::LargeStep step("adam");
  step.run();
  step.run();
  const auto t0 = std::chrono::steady_clock::now();
  double loss = 0;
  for (int i = 0; i < steps; ++i) loss = step.run();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.9f %.9g %s\n", s, loss, minitrain::thread_wait_policy().c_str());
  return 0;
}

// ---- the parent ----

std::string g_self;  // this program, as the kernel opened it
int g_threads = 0;
int g_steps = 10;

// Starts this program as a child with `policy`'s environment; returns its seconds for g_steps
// steps, or a negative number with `error` set.
double time_child(const Policy& policy, std::string& error) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    if (kv.rfind("OMP_WAIT_POLICY=", 0) == 0 || kv.rfind("GOMP_SPINCOUNT=", 0) == 0) continue;
    env.push_back(kv);
  }
  for (const auto& [k, v] : policy.env) env.push_back(k + "=" + v);
  std::vector<std::string> args = {g_self, "--child-steps=" + std::to_string(g_steps),
                                   "--threads=" + std::to_string(g_threads)};
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe(fds) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, g_self.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    error = "posix_spawn " + g_self + ": " + std::strerror(rc);
    return -1;
  }
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || out.empty()) {
    error = "the child for policy " + policy.name + " failed (status " + std::to_string(status) +
            ", output '" + out + "')";
    return -1;
  }
  return std::strtod(out.c_str(), nullptr);
}

// One busy process per core while it lives.
class BackgroundLoad {
 public:
  explicit BackgroundLoad(int processes) {
    for (int i = 0; i < processes; ++i) {
      const pid_t pid = fork();
      if (pid == 0) {
        volatile uint64_t x = 0;
        for (;;) x = x + 1;  // until SIGKILL
      }
      if (pid > 0) pids_.push_back(pid);
    }
  }
  ~BackgroundLoad() {
    for (pid_t pid : pids_) kill(pid, SIGKILL);
    for (pid_t pid : pids_) waitpid(pid, nullptr, 0);
  }
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

 private:
  std::vector<pid_t> pids_;
};

// Mean step seconds of passive, per condition, from this run.
std::map<std::string, double>& passive_seconds() {
  static std::map<std::string, double> table;
  return table;
}

void policy_case(benchmark::State& state, const Policy& policy, bool loaded) {
  const std::string condition = loaded ? "loaded" : "idle";
  BackgroundLoad load(loaded ? minitrain::available_cores() : 0);
  double total = 0;
  for (auto _ : state) {
    std::string error;
    const double s = time_child(policy, error);
    if (s < 0) {
      state.SkipWithError(error.c_str());
      return;
    }
    state.SetIterationTime(s / g_steps);
    total += s / g_steps;
  }
  const double per_step = total / double(state.iterations());
  double& ref = passive_seconds()[condition];
  if (policy.name == "passive") ref = per_step;
  if (ref > 0) state.counters["x_passive"] = per_step / ref;
  state.counters["samples/s"] = double(minitrain::bench::kLargeStepBatch) / per_step;
  std::string label;
  for (const auto& [k, v] : policy.env) label += (label.empty() ? "" : " ") + k + "=" + v;
  state.SetLabel(label.empty() ? "(no variable)" : label);
}

// Takes --name=N out of argv; returns N or `fallback`.
int take_int_flag(int& argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  int value = fallback, kept = 0;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0)
      value = std::atoi(argv[i] + prefix.size());
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const int child_steps = take_int_flag(argc, argv, "child-steps", 0);
  g_threads = take_int_flag(argc, argv, "threads", 0);
  if (g_threads > 0) minitrain::set_num_threads(g_threads);
  if (child_steps > 0) return run_child(child_steps);

  g_threads = minitrain::num_threads();
  g_steps = std::max(1, take_int_flag(argc, argv, "steps", 10));
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) {
    std::fprintf(stderr, "minitrain_thread_policy_bench: cannot read /proc/self/exe\n");
    return 1;
  }
  g_self.assign(self, size_t(n));

  benchmark::AddCustomContext("model", "mlp:256,1024,1024,1 relu, batch 256, adam, float32");
  benchmark::AddCustomContext("threads", std::to_string(g_threads));
  benchmark::AddCustomContext("steps per child", std::to_string(g_steps));
  benchmark::AddCustomContext("background load",
                              std::to_string(minitrain::available_cores()) + " busy processes");
  for (const bool loaded : {false, true})
    for (const Policy& p : policies())
      benchmark::RegisterBenchmark(
          (std::string("thread_policy/") + (loaded ? "loaded/" : "idle/") + p.name).c_str(),
          [p, loaded](benchmark::State& s) { policy_case(s, p, loaded); })
          ->UseManualTime()
          ->Iterations(3)
          ->Unit(benchmark::kMillisecond);

  return minitrain::bench::run_benchmarks(argc, argv);
}
