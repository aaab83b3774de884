// `minitrain pipelines`: turns each run of runs.toml into a directory, a config file and a
// `minitrain train` command line, then hands them to the scheduler (parallel/runs/run_scheduler.h).
// "pipelines" is the command's historical name for independent runs (it is not GPipe's pipeline,
// parallel/model_parallel.h); its name, flags, output and files stay as users know them.

#include "tools/runs_command.h"

#include <CLI/CLI.hpp>

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <system_error>
#include <thread>
#include <vector>

#include "core/atomic_file.h"
#include "core/device.h"
#include "core/error.h"
#include "parallel/runs/run_scheduler.h"
#include "parallel/launch/subprocess.h"
#include "tools/runs_table.h"
#include "train/runs_config.h"

namespace fs = std::filesystem;

namespace minitrain::cli {
namespace {

volatile std::sig_atomic_t g_stop_signal = 0;
extern "C" void on_stop_signal(int sig) { g_stop_signal = sig; }

// SIGINT and SIGTERM set a flag while it lives, so the scheduler can stop the runs it started
// (they lead process groups of their own, so a terminal's Ctrl-C does not reach them itself).
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~StopSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

void make_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    MT_THROW(IoError, "pipelines: cannot create the directory '", dir.string(), "': ", ec.message(),
             "; choose another --out DIR");
}

fs::path default_out_dir(const std::string& config_path) {
  const fs::path p(config_path);
  const fs::path parent = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  return parent / ("pipelines-" + p.stem().string());
}

// The device the scheduler queues the run for: "auto" becomes a GPU when there is one.
std::string scheduled_device(const std::string& device, int gpus) {
  if (device == "auto") return gpus > 0 ? "cuda" : "cpu";
  return device;
}

}  // namespace

RunsCommand::RunsCommand(CLI::App& parent) {
  app_ = parent.add_subcommand(
      "pipelines",
      "independent training runs, each its own process on its own device, queued "
      "when the devices are busy");
  app_->alias(
      "runs");  // the library's name for them (parallel/runs/); `pipelines` stays for scripts
  app_->add_option("--config", config_path_,
                   "TOML file: optional [defaults], one [[run]] table per run (name, "
                   "device, and any minitrain train key)")
      ->option_text("FILE")
      ->required();
  app_->add_option(
          "--out", out_dir_,
          "directory of the runs' outputs (default: pipelines-<file stem> beside the file)")
      ->option_text("DIR");
  app_->add_option("--cpu-slots", cpu_slots_,
                   "CPU runs at once (default: as many as fit the cores, each run's `threads` or "
                   "1 thread apiece, at most one per CPU run); each run without `threads` gets "
                   "cores/slots threads")
      ->option_text("N");
  app_->add_option("--max-runs", max_runs_,
                   "refuse a file that makes more runs than this (default 1000); each run is a "
                   "process and a directory")
      ->option_text("N");
  app_->add_flag("--overwrite", overwrite_,
                 "replace the runs of an earlier invocation in --out DIR (refused without it)");
  app_->add_option("--status-every", status_every_, "seconds between status updates (default 2)")
      ->option_text("SECONDS");
  app_->footer(
      "Each run gets DIR/NAME/ with config.toml, output.log and metrics.jsonl when it starts (a "
      "run that never starts leaves none); DIR/summary.json holds every run's status, final "
      "loss and time. The exit status is 1 when any run failed.");
}

bool RunsCommand::parsed() const { return app_->parsed(); }

int RunsCommand::run(std::ostream& out, std::ostream& status) {
  const bool auto_slots = app_->count("--cpu-slots") == 0;
  MT_CHECK_AS(ValueError, auto_slots || cpu_slots_ >= 1, "--cpu-slots must be >= 1, got ",
              cpu_slots_);
  MT_CHECK_AS(ValueError, max_runs_ >= 1, "--max-runs must be >= 1, got ", max_runs_);
  MT_CHECK_AS(ValueError, status_every_ > 0, "--status-every must be > 0 seconds, got ",
              status_every_);
  RunsFile file = read_runs_config(config_path_);
  check_run_count(file, max_runs_);  // a typo of 100 x 1000 runs, before any directory
  const fs::path out_dir = out_dir_.empty() ? default_out_dir(config_path_) : fs::path(out_dir_);
  place_run_outputs(file, out_dir.string());  // before anything is written: two runs, one file
  if (!overwrite_) {
    // An earlier sweep's results are refused rather than silently replaced run by run (a rerun
    // that fails early would leave a summary.json and directories of two invocations).
    std::vector<std::string> earlier;
    if (fs::exists(out_dir / "summary.json"))
      earlier.push_back((out_dir / "summary.json").string());
    for (const RunsFileEntry& run : file.runs)
      if (fs::exists(out_dir / run.name / "output.log"))
        earlier.push_back((out_dir / run.name / "output.log").string());
    if (!earlier.empty())
      MT_THROW(ValueError, "pipelines: --out ", out_dir.string(),
               " holds the results of an earlier invocation (", earlier.front(),
               earlier.size() > 1 ? " and " + std::to_string(earlier.size() - 1) + " more" : "",
               "); choose another --out DIR, or pass --overwrite to replace them");
  }
  make_dir(out_dir);

  const int gpus = cuda_device_count();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (auto_slots) {
    // As many CPU runs at once as fit the cores: each takes its `threads` (the most any run
    // asks for) or one core, and there are no more slots than CPU runs.
    int64_t per_run = 1, cpu_runs = 0;
    for (const RunsFileEntry& run : file.runs) {
      if (!run.error.empty() || scheduled_device(run.config.device, gpus) != "cpu") continue;
      ++cpu_runs;
      per_run = std::max<int64_t>(per_run, run.config.threads);
    }
    cpu_slots_ =
        static_cast<int>(std::clamp<int64_t>(cores / per_run, 1, std::max<int64_t>(1, cpu_runs)));
  }
  const int64_t cpu_threads = std::max(1, cores / cpu_slots_);
  const std::string self = self_executable();

  std::vector<RunJob> jobs;
  for (RunsFileEntry& run : file.runs) {
    const fs::path dir = fs::absolute(out_dir / run.name).lexically_normal();
    RunJob job;
    job.name = run.name;
    job.priority = run.priority;
    job.nice = run.priority < 0 ? -run.priority : 0;  // gentler on the CPU for less urgent runs
    job.output_path = (dir / "output.log").string();
    TrainConfig& c = run.config;
    job.device = scheduled_device(c.device, gpus);
    if (!run.error.empty()) {  // never started: its reason goes to the status and the summary
      job.setup_error = run.error;
      jobs.push_back(std::move(job));
      continue;
    }
    const bool gpu = job.device != "cpu";
    c.device = gpu ? "cuda:0" : "cpu";  // a GPU run sees only its GPU (CUDA_VISIBLE_DEVICES)
    if (!gpu && c.threads == 0) c.threads = cpu_threads;
    c.progress = "lines";
    job.metrics_path = c.log;
    const std::string config_file = (dir / "config.toml").string();
    job.argv = {self, "train", "--config", config_file, "--progress", "lines"};
    // The run's directory and files are made when it starts, not all at the beginning: a run
    // that never starts (interrupted while queued, or refused) leaves nothing behind.
    job.prepare = [dir, c, config_file, output = job.output_path] {
      make_dir(dir);
      write_file_atomically(output, "");  // the child appends; start each invocation afresh
      // A stale log of an earlier invocation would show as this run's progress until it starts.
      if (c.log == (dir / "metrics.jsonl").string() && !c.resume) fs::remove(c.log);
      // Outputs placed in the run's directory may name a folder of their own there.
      for (const std::string* p : {&c.save, &c.save_best, &c.log})
        if (!p->empty() && p->rfind(dir.string() + "/", 0) == 0)
          make_dir(fs::path(*p).parent_path());
      write_file_atomically(config_file, config_to_toml(c));
    };
    jobs.push_back(std::move(job));
  }

  status << "pipelines: " << jobs.size() << " run(s) from " << config_path_ << " into "
         << out_dir.string() << "; " << cpu_slots_ << " CPU slot(s) of " << cpu_threads
         << " thread(s), " << gpus << " GPU(s)\n"
         << std::flush;

  RunsOptions options;
  options.cpu_slots = cpu_slots_;
  options.gpu_count = gpus;
  options.status_every =
      std::chrono::milliseconds(std::max<int64_t>(1, static_cast<int64_t>(status_every_ * 1000)));
  // A terminal gets the live table redrawn in place; a file or pipe gets plain lines.
  if (isatty(STDERR_FILENO) != 0 && &status == &std::cerr)
    options.draw_status = live_runs_table(status);

  std::vector<RunResult> results;
  {
    StopSignals signals;
    results = schedule_runs(jobs, options, subprocess_starter(), status,
                            [] { return g_stop_signal != 0; });
  }
  const std::string summary = (out_dir / "summary.json").string();
  write_runs_summary(summary, results);
  out << runs_summary_table(results) << "summary: " << summary << "\n";
  const bool all_ok =
      std::all_of(results.begin(), results.end(), [](const RunResult& r) { return r.ok(); });
  return all_ok ? 0 : 1;
}

}  // namespace minitrain::cli
