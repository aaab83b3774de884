// The scheduler of independent runs (`minitrain pipelines`): one loop that reaps ended runs, starts
// queued ones on free slots and prints status. Children write to files (output.log, metrics.jsonl)
// rather than pipes, so the loop never has to drain anything and a run's files outlive it for the
// user to read.

#include "parallel/runs/run_scheduler.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/bytes.h"
#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

using Clock = std::chrono::steady_clock;

// ---- reading a run's files ----

// The last `max_bytes` of a file, from a line start; "" when it cannot be read.
std::string file_tail(const std::string& path, std::streamoff max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";
  const std::streamoff from = std::max<std::streamoff>(0, size - max_bytes);
  in.seekg(from);
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (from > 0) {  // drop the partial first line
    const auto nl = text.find('\n');
    text = nl == std::string::npos ? "" : text.substr(nl + 1);
  }
  return text;
}

std::vector<std::string> split_lines(const std::string& text, bool complete_only) {
  std::vector<std::string> lines;
  std::size_t begin = 0;
  while (begin < text.size()) {
    const auto nl = text.find('\n', begin);
    if (nl == std::string::npos) {
      if (!complete_only) lines.push_back(text.substr(begin));
      break;
    }
    lines.push_back(text.substr(begin, nl - begin));
    begin = nl + 1;
  }
  for (std::string& l : lines) {  // a progress bar's carriage returns: keep what was drawn last
    while (!l.empty() && l.back() == '\r') l.pop_back();
    if (const auto cr = l.find_last_of('\r'); cr != std::string::npos) l = l.substr(cr + 1);
  }
  return lines;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// ---- status text ----

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

// ---- the real starter ----

class SubprocessRun : public RunningProcess {
 public:
  explicit SubprocessRun(Subprocess p) : p_(std::move(p)) {}
  int pid() const override { return p_.pid(); }
  std::optional<ExitStatus> poll() override { return p_.poll(); }
  ExitStatus terminate(std::chrono::milliseconds grace) override { return p_.terminate(grace); }

 private:
  Subprocess p_;
};

// ---- the scheduler ----

class Scheduler {
 public:
  Scheduler(const std::vector<RunJob>& jobs, const RunsOptions& options,
            const ProcessStarter& start, std::ostream& status)
      : jobs_(jobs),
        options_(options),
        start_(start),
        status_(status),
        cpu_free_(std::max(options.cpu_slots, 1)),
        gpu_busy_(static_cast<std::size_t>(std::max(options.gpu_count, 0)), false),
        runs_(jobs.size()) {
    for (std::size_t i = 0; i < jobs.size(); ++i) {
      Run& r = runs_[i];
      r.result.name = jobs[i].name;
      r.result.priority = jobs[i].priority;
      r.result.device = jobs[i].device;
      if (!jobs[i].setup_error.empty())
        fail_unstarted(i, jobs[i].setup_error);
      else if (const std::string why = device_problem(jobs[i].device); !why.empty())
        fail_unstarted(i, why);
    }
  }

  std::vector<RunResult> run(const std::function<bool()>& stop_requested) {
    Clock::time_point next_status = Clock::now();
    while (any(RunState::Queued) || any(RunState::Running)) {
      if (stop_requested && stop_requested()) {
        interrupt();
        break;
      }
      reap();
      start_queued();
      if (Clock::now() >= next_status) {
        print_status();
        next_status = Clock::now() + options_.status_every;
      }
      if (any(RunState::Running) || any(RunState::Queued))
        std::this_thread::sleep_for(options_.poll_every);
    }
    if (options_.draw_status) print_status();  // the final states in the table
    std::vector<RunResult> results;
    for (Run& r : runs_) results.push_back(std::move(r.result));
    return results;
  }

 private:
  struct Run {
    RunResult result;
    std::unique_ptr<RunningProcess> process;
    int gpu = -1;  // the GPU it holds while running, -1: a CPU slot
    Clock::time_point started;
    int64_t total_steps = 0;  // as its output last said, for the status of an ended run
  };

  bool any(RunState s) const {
    return std::any_of(runs_.begin(), runs_.end(),
                       [s](const Run& r) { return r.result.state == s; });
  }
  bool is_gpu(const std::string& device) const { return starts_with(device, "cuda"); }

  // Why a device can never be had on this machine; "" when it can.
  std::string device_problem(const std::string& device) const {
    if (device == "cpu") return "";
    if (device == "cuda" || starts_with(device, "cuda:")) {
      if (options_.gpu_count <= 0)
        return "device '" + device +
               "' but this machine has no usable GPU; use device = \"cpu\" (or \"auto\")";
      if (device == "cuda") return "";
      const std::string index = device.substr(5);
      const bool digits = !index.empty() && std::all_of(index.begin(), index.end(), ::isdigit);
      if (!digits || std::stoll(index) >= options_.gpu_count)
        return "device '" + device + "' but this machine has " +
               std::to_string(options_.gpu_count) +
               " GPU(s) (cuda:0..cuda:" + std::to_string(options_.gpu_count - 1) + ")";
      return "";
    }
    return "device '" + device + "' is none of cpu, cuda, cuda:N";
  }

  void fail_unstarted(std::size_t i, const std::string& reason) {
    Run& r = runs_[i];
    r.result.state = RunState::Failed;
    r.result.exit_status = "not started";
    r.result.reason = reason;
    if (!options_.draw_status)
      status_ << "[" << r.result.name << "] failed: " << reason << "\n" << std::flush;
  }

  // A free slot for `device`: true with `gpu` set (-1 for a CPU slot) when there is one.
  bool take_slot(const std::string& device, int& gpu) {
    if (!is_gpu(device)) {
      if (cpu_free_ == 0) return false;
      --cpu_free_;
      gpu = -1;
      return true;
    }
    if (device == "cuda") {
      for (std::size_t g = 0; g < gpu_busy_.size(); ++g)
        if (!gpu_busy_[g]) return gpu_busy_[g] = true, gpu = static_cast<int>(g), true;
      return false;
    }
    const auto g = static_cast<std::size_t>(std::stoll(device.substr(5)));
    if (gpu_busy_[g]) return false;
    gpu_busy_[g] = true;
    gpu = static_cast<int>(g);
    return true;
  }
  void release_slot(const Run& r) {
    if (r.gpu < 0)
      ++cpu_free_;
    else
      gpu_busy_[static_cast<std::size_t>(r.gpu)] = false;
  }

  void start_queued() {
    // The most urgent first; file order among equals (a stable sort of the indices).
    std::vector<std::size_t> order(runs_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [this](std::size_t a, std::size_t b) {
      return jobs_[a].priority > jobs_[b].priority;
    });
    for (std::size_t i : order) {
      Run& r = runs_[i];
      if (r.result.state != RunState::Queued) continue;
      const RunJob& job = jobs_[i];
      int gpu = -1;
      if (!take_slot(job.device, gpu)) continue;  // waits; later runs may still fit other slots
      SubprocessOptions so;
      so.argv = job.argv;
      so.env = job.env;
      so.output_path = job.output_path;
      so.nice = job.nice;
      // Pinned: the run sees only its GPU, as cuda:0.
      if (gpu >= 0) so.env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(gpu));
      r.gpu = gpu;
      r.result.device = gpu >= 0 ? "cuda:" + std::to_string(gpu) : "cpu";
      r.started = Clock::now();
      r.result.start_time = unix_now();
      try {
        if (job.prepare) job.prepare();
        r.process = start_(so);
      } catch (const std::exception& e) {
        release_slot(r);
        r.result.end_time = r.result.start_time;
        fail_unstarted(i, std::string("cannot start: ") + e.what());
        continue;
      }
      r.result.state = RunState::Running;
      if (!options_.draw_status)
        status_ << "[" << job.name << "] started on " << r.result.device << " (pid "
                << r.process->pid() << ")\n"
                << std::flush;
    }
  }

  void finish(std::size_t i, const ExitStatus& st, const std::string& interrupted_reason = "") {
    Run& r = runs_[i];
    const RunJob& job = jobs_[i];
    r.result.end_time = unix_now();
    r.result.seconds = std::chrono::duration<double>(Clock::now() - r.started).count();
    r.result.exit_status = st.str();
    if (st.signal != 0)
      r.result.signal = st.signal;
    else
      r.result.exit_code = st.code;
    const RunProgress p = read_run_progress(job.metrics_path, job.output_path);
    r.result.steps = p.step;
    r.result.final_loss = p.loss;
    r.result.outcome = read_run_outcome(job.metrics_path);
    // The run's own peak (sampling misses a short run's, and a finished run has no RSS left).
    r.result.peak_host_memory = std::max(r.result.peak_host_memory, p.host_memory_peak);
    r.total_steps = p.total_steps;
    if (!interrupted_reason.empty()) {
      r.result.state = RunState::Failed;
      r.result.reason = interrupted_reason;
    } else if (st.ok()) {
      r.result.state = RunState::Done;
    } else {
      r.result.state = RunState::Failed;
      r.result.reason = failure_reason(job.output_path, st);
    }
    release_slot(r);
    r.process.reset();
    if (!options_.draw_status) {
      status_ << "[" << r.result.name << "] " << run_state_name(r.result.state) << " ("
              << r.result.exit_status << ") after " << fmt("%.1f", r.result.seconds) << " s";
      if (r.result.final_loss)
        status_ << ", step " << r.result.steps << " loss " << fmt("%.6g", *r.result.final_loss);
      if (!r.result.reason.empty()) status_ << ": " << r.result.reason;
      status_ << "\n" << std::flush;
    }
  }

  void reap() {
    for (std::size_t i = 0; i < runs_.size(); ++i)
      if (runs_[i].result.state == RunState::Running)
        if (const std::optional<ExitStatus> st = runs_[i].process->poll()) finish(i, *st);
  }

  void interrupt() {
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      Run& r = runs_[i];
      if (r.result.state == RunState::Running) {
        finish(i, r.process->terminate(options_.terminate_grace), "interrupted");
      } else if (r.result.state == RunState::Queued) {
        fail_unstarted(i, "interrupted before it started");
      }
    }
  }

  void print_status() {
    std::vector<RunStatus> statuses;
    std::string plain;
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      Run& r = runs_[i];
      const RunState s = r.result.state;
      RunProgress p;
      uint64_t rss = 0;
      if (s == RunState::Running) {
        p = read_run_progress(jobs_[i].metrics_path, jobs_[i].output_path);
        rss = process_rss_bytes(r.process->pid());
        r.result.peak_host_memory = std::max(r.result.peak_host_memory, rss);
      } else if (s != RunState::Queued) {
        p.step = r.result.steps;
        p.total_steps = r.total_steps;
        p.loss = r.result.final_loss;
      }
      if (s == RunState::Running) {
        const std::string loss = p.loss ? fmt("%.6g", *p.loss) : "-";
        const std::string step_ms = p.step_ms > 0 ? fmt("%.2f", p.step_ms) : "-";
        const std::string dev_mem = p.step > 0 ? format_bytes(p.device_memory) : "-";
        const std::string host_mem = rss > 0 ? format_bytes(rss) : "-";
        plain += "[" + r.result.name + "] running on " + r.result.device + "  step " +
                 run_step_text(p) + "  loss " + loss + "  step_ms " + step_ms + "  device mem " +
                 dev_mem + "  host mem " + host_mem + "  cpu " + run_cpu_text(p) + "\n";
      }
      statuses.push_back({r.result.name, s, r.result.device, p, rss});
    }
    if (options_.draw_status) {
      options_.draw_status(statuses);
    } else {
      status_ << plain << std::flush;
    }
  }

  const std::vector<RunJob>& jobs_;
  const RunsOptions& options_;
  const ProcessStarter& start_;
  std::ostream& status_;
  int cpu_free_;
  std::vector<bool> gpu_busy_;
  std::vector<Run> runs_;
};

}  // namespace

std::string run_cpu_text(const RunProgress& p) {
  std::string text = p.cpu_utilization ? fmt("%.2f", *p.cpu_utilization) : "-";
  if (p.gpu_utilization) text += "  gpu " + fmt("%.0f%%", *p.gpu_utilization);
  if (p.gpu_memory) text += "  gpu mem " + format_bytes(*p.gpu_memory);
  return text;
}

std::string run_step_text(const RunProgress& p) {
  if (p.step == 0) return "-";
  return std::to_string(p.step) + "/" + (p.total_steps > 0 ? std::to_string(p.total_steps) : "?");
}

const char* run_state_name(RunState s) {
  switch (s) {
    case RunState::Queued:
      return "queued";
    case RunState::Running:
      return "running";
    case RunState::Done:
      return "done";
    case RunState::Failed:
      return "failed";
  }
  return "?";
}

ProcessStarter subprocess_starter() {
  return [](const SubprocessOptions& options) -> std::unique_ptr<RunningProcess> {
    return std::make_unique<SubprocessRun>(Subprocess::start(options));
  };
}

RunProgress read_run_progress(const std::string& metrics_path, const std::string& output_path) {
  RunProgress p;
  // The last complete metrics line: a line being written is skipped until its '\n' arrives.
  const std::vector<std::string> metrics =
      split_lines(file_tail(metrics_path, 16384), /*complete_only=*/true);
  for (auto it = metrics.rbegin(); it != metrics.rend(); ++it) {
    const nlohmann::json j = nlohmann::json::parse(*it, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("step") || !j["step"].is_number_integer()) continue;
    p.step = j["step"].get<int64_t>();
    if (j.contains("loss") && j["loss"].is_number())
      p.loss = j["loss"].get<double>();
    else if (j.contains("loss"))  // a diverged run logs null, and says which non-finite value
      p.loss = nonfinite_value(j.value("loss_nonfinite", std::string("nan")));
    if (j.contains("step_ms") && j["step_ms"].is_number()) p.step_ms = j["step_ms"].get<double>();
    if (j.contains("device") && j["device"].is_string()) p.device = j["device"].get<std::string>();
    if (j.contains("memory_in_use_bytes") && j["memory_in_use_bytes"].is_number_unsigned())
      p.device_memory = j["memory_in_use_bytes"].get<uint64_t>();
    if (j.contains("host_memory_peak_bytes") && j["host_memory_peak_bytes"].is_number_unsigned())
      p.host_memory_peak = j["host_memory_peak_bytes"].get<uint64_t>();
    if (j.contains("cpu_utilization") && j["cpu_utilization"].is_number())
      p.cpu_utilization = j["cpu_utilization"].get<double>();
    if (j.contains("gpu_utilization_pct") && j["gpu_utilization_pct"].is_number())
      p.gpu_utilization = j["gpu_utilization_pct"].get<double>();
    if (j.contains("gpu_memory_used_bytes") && j["gpu_memory_used_bytes"].is_number_unsigned())
      p.gpu_memory = j["gpu_memory_used_bytes"].get<uint64_t>();
    break;
  }
  // The run's length: its progress lines read "step S/T (P%)  epoch ...".
  const std::vector<std::string> out =
      split_lines(file_tail(output_path, 16384), /*complete_only=*/false);
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    long long s = 0, t = 0;
    const auto at = it->find("step ");
    if (at != std::string::npos && std::sscanf(it->c_str() + at, "step %lld/%lld", &s, &t) == 2) {
      p.total_steps = t;
      break;
    }
  }
  return p;
}

namespace {
std::string last_error_line(const std::vector<std::string>& lines) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (lower(*it).find("error") != std::string::npos) return *it;
  return "";
}
}  // namespace

std::string failure_reason(const std::string& output_path) {
  const std::vector<std::string> lines =
      split_lines(file_tail(output_path, 16384), /*complete_only=*/false);
  std::string error = last_error_line(lines);
  if (!error.empty()) return error;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (it->find_first_not_of(" \t") != std::string::npos) return *it;
  return "";
}

std::string failure_reason(const std::string& output_path, const ExitStatus& status) {
  if (status.signal == 0) {
    std::string reason = failure_reason(output_path);
    return reason.empty() ? status.str() : reason;
  }
  std::string reason =
      detail::concat("killed by signal ", status.signal, " (", signal_name(status.signal), ")");
  const std::string error =
      last_error_line(split_lines(file_tail(output_path, 16384), /*complete_only=*/false));
  if (!error.empty()) reason += "; its last error line: " + error;
  return reason;
}

std::vector<RunResult> schedule_runs(const std::vector<RunJob>& jobs, const RunsOptions& options,
                                     const ProcessStarter& start, std::ostream& status,
                                     const std::function<bool()>& stop_requested) {
  MT_CHECK_AS(ValueError, options.cpu_slots >= 1, "pipelines: --cpu-slots must be >= 1, got ",
              options.cpu_slots);
  MT_CHECK_AS(ValueError, options.status_every.count() > 0,
              "pipelines: --status-every must be > 0 s, got ", options.status_every.count(), " ms");
  return Scheduler(jobs, options, start, status).run(stop_requested);
}

std::optional<BestRun> best_run(const std::vector<RunResult>& results) {
  for (const char* by : {"best_val_loss", "epoch_loss"}) {
    std::optional<BestRun> best;
    for (std::size_t i = 0; i < results.size(); ++i) {
      const RunOutcome& o = results[i].outcome;
      const std::optional<double> v =
          std::string(by) == "best_val_loss" ? o.best_val_loss : o.epoch_loss;
      if (results[i].ok() && v && std::isfinite(*v) && (!best || *v < best->value))
        best = BestRun{i, by, *v};
    }
    if (best) return best;
  }
  return std::nullopt;
}

std::string runs_summary_json(const std::vector<RunResult>& results) {
  const auto number = [](const std::optional<double>& v) {
    return v && std::isfinite(*v) ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
  };
  nlohmann::ordered_json runs = nlohmann::ordered_json::array();
  int failed = 0;
  for (const RunResult& r : results) {
    failed += r.ok() ? 0 : 1;
    nlohmann::ordered_json j;
    j["name"] = r.name;
    j["device"] = r.device;
    j["priority"] = r.priority;
    j["status"] = r.ok() ? "ok" : "failed";
    j["exit_status"] = r.exit_status;
    j["exit_code"] = r.exit_code ? nlohmann::ordered_json(*r.exit_code) : nullptr;
    j["signal"] = r.signal ? nlohmann::ordered_json(*r.signal) : nullptr;
    j["reason"] = r.reason;
    j["final_loss"] = r.final_loss && std::isfinite(*r.final_loss)
                          ? nlohmann::ordered_json(*r.final_loss)
                          : nlohmann::ordered_json(nullptr);
    if (r.final_loss && !std::isfinite(*r.final_loss))  // JSON has no inf: spelled out
      j["final_loss_nonfinite"] = nonfinite_name(*r.final_loss);
    j["epoch_loss"] = number(r.outcome.epoch_loss);
    j["epoch_accuracy"] = number(r.outcome.epoch_accuracy);
    j["val_loss"] = number(r.outcome.val_loss);
    j["val_accuracy"] = number(r.outcome.val_accuracy);
    j["best_val_loss"] = number(r.outcome.best_val_loss);
    j["best_step"] = r.outcome.best_val_loss ? nlohmann::ordered_json(r.outcome.best_step)
                                             : nlohmann::ordered_json(nullptr);
    j["steps"] = r.steps;
    j["seconds"] = r.seconds;
    j["start_time"] = r.start_time;
    j["end_time"] = r.end_time;
    j["peak_host_memory_bytes"] = r.peak_host_memory;
    j["cpu_utilization"] = number(r.outcome.cpu_utilization);
    j["gpu_utilization_pct"] = number(r.outcome.gpu_utilization_pct);
    j["gpu_memory_peak_bytes"] = r.outcome.gpu_memory_peak_bytes
                                     ? nlohmann::ordered_json(*r.outcome.gpu_memory_peak_bytes)
                                     : nlohmann::ordered_json(nullptr);
    runs.push_back(j);
  }
  nlohmann::ordered_json doc;
  doc["runs"] = runs;
  doc["failed"] = failed;
  if (const std::optional<BestRun> best = best_run(results))
    doc["best_run"] = {
        {"name", results[best->index].name}, {"by", best->by}, {"value", best->value}};
  else
    doc["best_run"] = nullptr;
  // A reason quotes a run's error line, whose paths may hold bytes that are not UTF-8: they
  // become U+FFFD rather than a JSON exception that would lose the whole summary.
  return doc.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

void write_runs_summary(const std::string& path, const std::vector<RunResult>& results) {
  write_file_atomically(path, runs_summary_json(results));
}

}  // namespace minitrain
