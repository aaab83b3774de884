#pragma once
// Independent runs, each its own process on its own device (`minitrain pipelines`): a run waits
// in file order until a slot of its kind is free (one of N CPU slots, or one GPU per run), starts
// pinned to it, and is watched through its output file and its metrics log (JSON lines, see
// train/metrics_log.h). A run that fails does not stop the others. Live status every few seconds,
// and at the end one result per run for the summary table and summary.json. A real run is a
// Subprocess in a process group of its own: what it leaves running ends with it, and every run
// ends when `minitrain pipelines` does, SIGKILL included (Note [child lifetime] in subprocess.cpp).
// ("pipelines" is the command's historical name for independent runs; GPipe's pipeline is
// parallel/model_parallel.h.)
//
// The scheduler knows nothing of training: a run is argv + env + device + file paths. Processes
// come from an injectable starter, so the scheduling logic is tested without real children.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "parallel/launch/subprocess.h"
#include "parallel/runs/run_outcome.h"

namespace minitrain {

struct RunJob {
  std::string name;
  std::string device;  ///< "cpu", "cuda" (any free GPU) or "cuda:N"
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env;  ///< on top of this process's environment
  std::string output_path;   ///< the child's stdout and stderr (appended)
  std::string metrics_path;  ///< its JSON-lines metrics log, read for status and the final loss
  std::string setup_error;   ///< non-empty: the run fails with this reason and is never started
  /// Makes what the run needs on disk (its directory, config, an empty output file) just before
  /// it starts, so that a run that never starts leaves nothing behind. Null: nothing to make. An
  /// exception fails the run as "not started", with its message.
  std::function<void()> prepare;
  /// Higher starts first when runs wait for a slot (ties: file order).
  int priority = 0;
  int nice = 0;  ///< the child's CPU niceness (SubprocessOptions::nice)
};

struct RunStatus;  // below: one run at a status update

struct RunsOptions {
  int cpu_slots = 1;  ///< CPU runs at once
  int gpu_count = 0;  ///< GPUs 0..gpu_count-1, one run each
  std::chrono::milliseconds status_every{2000};
  /// Set (a terminal: tools/runs_table.h's live table): every status update goes to it, and no
  /// event lines are printed; else plain lines to the status stream.
  std::function<void(const std::vector<RunStatus>&)> draw_status;
  std::chrono::milliseconds poll_every{50};
  std::chrono::milliseconds terminate_grace{5000};  ///< SIGTERM to SIGKILL, when interrupted
};

/// A started run as the scheduler sees it; the real one wraps a Subprocess.
class RunningProcess {
 public:
  virtual ~RunningProcess() = default;
  virtual int pid() const = 0;
  virtual std::optional<ExitStatus> poll() = 0;  ///< without blocking
  virtual ExitStatus terminate(std::chrono::milliseconds grace) = 0;
};
/// Starts one run; throws (IoError) when it cannot.
using ProcessStarter = std::function<std::unique_ptr<RunningProcess>(const SubprocessOptions&)>;
/// Real child processes (Subprocess::start, output to SubprocessOptions::output_path).
ProcessStarter subprocess_starter();

enum class RunState { Queued, Running, Done, Failed };
const char* run_state_name(RunState s);  ///< "queued", "running", "done", "failed"

/// What a run's files say of its progress (all zero / empty before its first step).
struct RunProgress {
  int64_t step = 0;
  int64_t total_steps = 0;  ///< from the last "step S/T" progress line of its output; 0: unknown
  std::optional<double> loss;
  double step_ms = 0;
  std::string device;             ///< as the run reports it ("cpu", "cuda:0")
  uint64_t device_memory = 0;     ///< memory_in_use_bytes
  uint64_t host_memory_peak = 0;  ///< host_memory_peak_bytes: the run's own peak resident memory
  std::optional<double> cpu_utilization;  ///< cores busy during its last logged step(s)
  std::optional<double> gpu_utilization;  ///< percent, where its log has it (NVML)
  std::optional<uint64_t> gpu_memory;     ///< the whole GPU's memory in use, where logged
};
/// "S/T", "S/?" when the total is unknown, "-" before the first step.
std::string run_step_text(const RunProgress& p);
/// The cores it keeps busy ("1.93", "-" before its first step), then "  gpu 87%  gpu mem 3.2 GiB"
/// where its log has the GPU's figures.
std::string run_cpu_text(const RunProgress& p);

/// One run at a status update: what a live table shows of it.
struct RunStatus {
  std::string name;
  RunState state = RunState::Queued;
  std::string device;
  RunProgress progress;      ///< of a running run as its files say; of an ended one, its result
  uint64_t host_memory = 0;  ///< its RSS now; 0 when not running
};

/// Reads the last line of `metrics_path` and the last progress line of `output_path`; a file
/// that is missing, empty or half-written gives what could be read.
RunProgress read_run_progress(const std::string& metrics_path, const std::string& output_path);

/// The line of `output_path` that best says why a run failed: the last one naming an error,
/// else the last non-empty one; "" when there is none.
std::string failure_reason(const std::string& output_path);
/// Why a run that ended with `status` (not ok) failed. A signal is the reason itself ("killed by
/// signal 9 (SIGKILL)"), followed by the last line of its output naming an error if there is one
/// ("...; its last error line: ..."): its last line is then mere progress, no explanation.
/// Otherwise failure_reason(output_path), or status.str() when the output says nothing.
std::string failure_reason(const std::string& output_path, const ExitStatus& status);

struct RunResult {
  std::string name;
  std::string device;  ///< where it ran ("cpu", "cuda:1"), or the device it asked for
  int priority = 0;    ///< RunJob::priority
  RunState state = RunState::Queued;
  bool ok() const noexcept { return state == RunState::Done; }
  std::string exit_status;           ///< "exit status 0", "signal 15 (Terminated)", "not started"
  std::optional<int> exit_code;      ///< the number in "exit status N"; unset for a signal
  std::optional<int> signal;         ///< the signal that ended it; unset when it exited
  std::string reason;                ///< why it failed; "" when ok
  std::optional<double> final_loss;  ///< the last step's (see outcome for the epoch's mean)
  RunOutcome outcome;                ///< its log's epoch mean and held-out numbers
  int64_t steps = 0;
  double seconds = 0;
  double start_time = 0, end_time = 0;  ///< Unix seconds; 0 when never started
  uint64_t peak_host_memory = 0;        ///< the run's peak resident memory (its log's, or sampled)
};

/// Runs every job to its end (or until `stop_requested` returns true: the running ones are
/// terminated and, like the queued ones, fail as "interrupted"). Status goes to `status`.
/// Results come in the jobs' order.
std::vector<RunResult> schedule_runs(const std::vector<RunJob>& jobs, const RunsOptions& options,
                                     const ProcessStarter& start, std::ostream& status,
                                     const std::function<bool()>& stop_requested = {});

/// {"runs": [{name, device, priority, status: ok|failed, exit_status, exit_code, signal, reason,
/// final_loss, epoch_loss, epoch_accuracy, val_loss, val_accuracy, best_val_loss, best_step, steps,
/// seconds, start_time, end_time, peak_host_memory_bytes, cpu_utilization (cores, over its logged
/// steps), gpu_utilization_pct and gpu_memory_peak_bytes (null without NVML), and
/// final_loss_nonfinite
/// ("inf", "-inf", "nan")
/// where final_loss is null for a non-finite loss}, ...], "failed": N, "best_run": {name, by,
/// value}} (absent numbers are null). The best run is the ok run with the lowest best_val_loss;
/// when no run was validated, the lowest epoch_loss, and "by" says which.
std::string runs_summary_json(const std::vector<RunResult>& results);
/// The index of the best run (see runs_summary_json) and what it was chosen by ("best_val_loss" or
/// "epoch_loss"); nullopt when no ok run has the number.
struct BestRun {
  std::size_t index = 0;
  const char* by = "";
  double value = 0;
};
std::optional<BestRun> best_run(const std::vector<RunResult>& results);
/// Writes runs_summary_json to `path` atomically.
void write_runs_summary(const std::string& path, const std::vector<RunResult>& results);

}  // namespace minitrain
