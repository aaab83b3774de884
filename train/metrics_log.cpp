// JSON-lines metrics. A resumed run first drops the lines of steps the checkpoint does not cover
// (a run that died after its last checkpoint logged them), so the log reads as one run.

#include "train/metrics_log.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/strings.h"

namespace minitrain {
namespace {

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// The existing log's lines for steps <= last_step. A last line that is not a metrics line is the
// torn end of a write cut short (disk full, killed), dropped and described in `note`; any
// earlier bad line is an IoError naming it, since that is a file this run did not write.
std::string kept_lines(const std::string& path, int64_t last_step, std::string& note) {
  const std::string text = read_file_bytes(path);
  std::string kept;
  int64_t number = 0;
  for (std::size_t begin = 0; begin < text.size();) {
    const std::size_t newline = text.find('\n', begin);
    const bool last = newline == std::string::npos || newline + 1 == text.size();
    const std::string line =
        text.substr(begin, newline == std::string::npos ? std::string::npos : newline - begin);
    begin = newline == std::string::npos ? text.size() : newline + 1;
    ++number;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool good = j.is_object() && j.contains("step") && j["step"].is_number_integer();
    if (!good && last && (newline == std::string::npos || j.is_discarded())) {
      note = detail::concat("--log ", path, ":", number, ": dropped a torn last line (",
                            line.size(), " bytes: \"", excerpt(line, 40),
                            "\"), left by a write that was cut short");
      continue;
    }
    if (!good)
      MT_THROW(IoError, "--log ", path, ":", number,
               ": not a metrics line (no integer \"step\"); give a new --log file to resume with");
    if (j["step"].get<int64_t>() <= last_step) kept += line + "\n";
  }
  return kept;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, int64_t continue_after_step, int64_t every)
    : path_(path), every_(every) {
  MT_CHECK_AS(ValueError, every >= 1, "--log-every must be at least 1 (steps per line), got ",
              every);
  int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  if (continue_after_step >= 0 && file_exists(path)) {
    write_file_atomically(path, kept_lines(path, continue_after_step, repair_note_));
    flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  }
  fd_ = ::open(path.c_str(), flags, 0666);
  if (fd_ < 0) {
    const int err = errno;
    MT_THROW(IoError, "cannot write the metrics log '", path, "': ", std::strerror(err));
  }
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

std::string metrics_json_line(const StepStats& s, int64_t steps) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  if (steps > 0) j["steps"] = steps;
  j["epoch"] = s.epoch;
  j["loss"] = s.loss;       // JSON has no inf or NaN: a non-finite loss is null, spelled out below
  if (s.nothing_counted) {  // no loss at all: every row ignored; the step made no update
    j["no_counted_rows"] = true;
    j["skipped"] = true;
  } else if (!std::isfinite(s.loss)) {
    j["loss_nonfinite"] = nonfinite_name(s.loss);
  }
  if (std::isfinite(s.accuracy)) j["accuracy"] = s.accuracy;
  if (s.epoch_end) j["epoch_end"] = true;
  if (s.val) {
    j["val_loss"] = s.val->loss;
    if (!std::isfinite(s.val->loss)) j["val_loss_nonfinite"] = nonfinite_name(s.val->loss);
    if (std::isfinite(s.val->accuracy)) j["val_accuracy"] = s.val->accuracy;
    if (std::isfinite(s.val->topk_accuracy))
      j["val_top" + std::to_string(s.val->topk) + "_accuracy"] = s.val->topk_accuracy;
    j["val_rows"] = s.val->rows;
  }
  j["lr"] = s.lr;
  j["step_ms"] = s.step_ms;
  j["data_wait_ms"] = s.data_wait_ms;
  j["samples_per_s"] = s.samples_per_s;
  j["cpu_utilization"] = s.step_ms > 0 ? s.cpu_ms / s.step_ms : 0.0;  // cores, on average
  if (s.grad_norm >= 0) j["grad_norm"] = s.grad_norm;
  if (std::isfinite(s.loss_scale)) {
    j["loss_scale"] = s.loss_scale;
    if (s.skipped) j["skipped"] = true;
    j["skipped_steps"] = s.skipped_steps;
  }
  j["device"] = s.device;
  j["memory_in_use_bytes"] = s.memory_in_use;
  j["memory_peak_bytes"] = s.memory_peak;
  j["host_memory_peak_bytes"] = s.host_memory_peak;
  if (s.gpu) {
    j["gpu_utilization_pct"] = s.gpu->utilization_pct;
    j["gpu_memory_used_bytes"] = s.gpu->memory_used_bytes;
    j["gpu_memory_total_bytes"] = s.gpu->memory_total_bytes;
  }
  return j.dump(-1, ' ', false,
                nlohmann::json::error_handler_t::replace);  // a device name is ASCII, but be safe
}

std::string rank_log_path(const std::string& path, int rank, int world_size) {
  if (world_size <= 1 || rank == 0) return path;
  const std::size_t slash = path.find_last_of('/');
  const std::size_t dot = path.find_last_of('.');
  const std::size_t name = slash == std::string::npos ? 0 : slash + 1;
  // A dot that starts the name (".log") or sits in a directory is no extension.
  const bool has_ext = dot != std::string::npos && dot > name;
  const std::string tag = ".rank" + std::to_string(rank);
  return has_ext ? path.substr(0, dot) + tag + path.substr(dot) : path + tag;
}

void MetricsLog::write(const StepStats& stats) {
  if (every_ == 1) {  // the common case: the step's own line, as it was
    write_line(stats, 0);
    return;
  }
  ++pending_steps_;
  pending_last_ = stats;
  if (!stats.nothing_counted) {  // a step with nothing to count is no part of the means
    loss_sum_ += stats.loss;
    accuracy_sum_ += stats.accuracy;
    ++counted_steps_;
  }
  if (stats.val) val_ = stats.val;
  epoch_end_ = epoch_end_ || stats.epoch_end;
  ms_sum_ += stats.step_ms;
  cpu_ms_sum_ += stats.cpu_ms;
  wait_sum_ += stats.data_wait_ms;
  if (stats.gpu) {
    gpu_utilization_sum_ += stats.gpu->utilization_pct;
    ++gpu_samples_;
    gpu_memory_max_ = std::max(gpu_memory_max_, stats.gpu->memory_used_bytes);
  }
  samples_ += stats.samples;
  if (stats.grad_norm >= 0) {
    grad_norm_sum_ += stats.grad_norm;
    ++grad_norms_;
  }
  peak_ = std::max(peak_, stats.memory_peak);
  if (stats.step % every_ == 0 || stats.step >= stats.total_steps) flush_pending();
}

void MetricsLog::flush_pending() {
  if (pending_steps_ == 0) return;
  StepStats mean = pending_last_;
  const double n = static_cast<double>(pending_steps_);
  const auto counted = static_cast<double>(counted_steps_);
  mean.loss = loss_sum_ / counted;  // 0/0 = NaN when no step counted: then nothing_counted
  mean.accuracy = accuracy_sum_ / counted;
  mean.nothing_counted = counted_steps_ == 0;
  mean.val = val_;
  mean.epoch_end = epoch_end_;
  mean.step_ms = ms_sum_ / n;
  mean.cpu_ms = cpu_ms_sum_ / n;  // over the mean step_ms: the interval's CPU over its wall time
  if (gpu_samples_ > 0)
    mean.gpu = GpuUsage{gpu_utilization_sum_ / static_cast<double>(gpu_samples_), gpu_memory_max_,
                        pending_last_.gpu ? pending_last_.gpu->memory_total_bytes : 0};
  mean.data_wait_ms = wait_sum_ / n;
  mean.samples = samples_;
  mean.samples_per_s = ms_sum_ > 0 ? static_cast<double>(samples_) / (ms_sum_ * 1e-3) : 0.0;
  mean.grad_norm = grad_norms_ > 0 ? grad_norm_sum_ / static_cast<double>(grad_norms_) : -1.0;
  mean.memory_peak = peak_;
  const int64_t steps = pending_steps_;
  pending_steps_ = 0;
  loss_sum_ = ms_sum_ = grad_norm_sum_ = accuracy_sum_ = wait_sum_ = cpu_ms_sum_ = 0;
  gpu_utilization_sum_ = 0;
  gpu_samples_ = 0;
  gpu_memory_max_ = 0;
  val_.reset();
  epoch_end_ = false;
  samples_ = grad_norms_ = counted_steps_ = 0;
  peak_ = 0;
  write_line(mean, steps);
}

void MetricsLog::write_line(const StepStats& stats, int64_t steps) {
  const std::string line = metrics_json_line(stats, steps) + '\n';
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);  // may write less than asked: loop
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      // What was cut short is a torn last line, which a resumed run drops (kept_lines).
      MT_THROW(IoError, "cannot write the metrics log '", path_, "': ", std::strerror(err),
               " (step ", stats.step, "'s line; the lines before it are intact)");
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace minitrain
