// Column-aligned text for `minitrain pipelines` (tools/runs_table.h says what each table is).

#include "tools/runs_table.h"

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <memory>

#include "core/bytes.h"

namespace minitrain {
namespace {

// Columns padded to their widest cell plus two spaces; no trailing blanks.
std::string table_text(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> width;
  for (const auto& row : rows)
    for (std::size_t i = 0; i < row.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], row[i].size());
    }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string clock_time(double unix_seconds) {
  if (unix_seconds <= 0) return "-";
  const std::time_t t = static_cast<std::time_t>(unix_seconds);
  std::tm tm{};
  localtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  return buf;
}

std::string status_table(const std::vector<RunStatus>& statuses) {
  std::vector<std::vector<std::string>> rows;
  rows.push_back(
      {"run", "state", "device", "step", "loss", "step_ms", "device mem", "host mem", "cpu"});
  for (const RunStatus& r : statuses) {
    const RunProgress& p = r.progress;
    const std::string loss = p.loss ? fmt("%.6g", *p.loss) : "-";
    const std::string step_ms = p.step_ms > 0 ? fmt("%.2f", p.step_ms) : "-";
    const std::string dev_mem =
        r.state == RunState::Running && p.step > 0 ? format_bytes(p.device_memory) : "-";
    const std::string host_mem = r.host_memory > 0 ? format_bytes(r.host_memory) : "-";
    // cpu: the cores it keeps busy; then the GPU's utilisation and memory where NVML reads them.
    const std::string cpu = r.state == RunState::Running ? run_cpu_text(p) : "-";
    rows.push_back({r.name, run_state_name(r.state), r.device, run_step_text(p), loss, step_ms,
                    dev_mem, host_mem, cpu});
  }
  return table_text(rows);
}

}  // namespace

std::string runs_summary_table(const std::vector<RunResult>& results) {
  std::vector<std::vector<std::string>> rows;
  // GPU columns only where a run's log has the GPU's figures (NVML read on its device).
  const bool gpu = std::any_of(results.begin(), results.end(), [](const RunResult& r) {
    return r.outcome.gpu_utilization_pct.has_value();
  });
  // "final loss" is summary.json's final_loss and the "done ... loss" status line's: the last
  // logged loss. "epoch loss" is the mean over the last epoch's steps (summary.json's epoch_loss);
  // it once stood in one column for both, so two runs' figures in it meant different things.
  rows.push_back({"run", "device", "status", "exit", "steps", "final loss", "epoch loss",
                  "best val loss", "seconds", "start", "end", "cpu"});
  if (gpu) rows.back().insert(rows.back().end(), {"gpu", "gpu mem"});
  int failed = 0;
  const auto number = [](const std::optional<double>& v) {
    return v ? fmt("%.6g", *v) : std::string("-");
  };
  for (const RunResult& r : results) {
    failed += r.ok() ? 0 : 1;
    rows.push_back({r.name, r.device, r.ok() ? "ok" : "failed", r.exit_status,
                    std::to_string(r.steps), number(r.final_loss), number(r.outcome.epoch_loss),
                    number(r.outcome.best_val_loss), fmt("%.2f", r.seconds),
                    clock_time(r.start_time), clock_time(r.end_time)});
    const RunOutcome& o = r.outcome;
    std::vector<std::string>& row = rows.back();
    row.push_back(o.cpu_utilization ? fmt("%.2f", *o.cpu_utilization) : "-");
    if (gpu)
      row.insert(row.end(),
                 {o.gpu_utilization_pct ? fmt("%.0f%%", *o.gpu_utilization_pct) : "-",
                  o.gpu_memory_peak_bytes ? format_bytes(*o.gpu_memory_peak_bytes) : "-"});
  }
  std::string out = table_text(rows);
  if (const std::optional<BestRun> best = best_run(results))
    out += "best: " + results[best->index].name + " (" +
           (std::string(best->by) == "best_val_loss" ? "lowest val_loss"
                                                     : "lowest epoch loss; no run was validated") +
           ", " + fmt("%.6g", best->value) + ")\n";
  for (const RunResult& r : results)
    if (!r.ok()) out += r.name + ": " + r.reason + "\n";
  out += std::to_string(results.size() - static_cast<std::size_t>(failed)) + " of " +
         std::to_string(results.size()) + " run(s) ok" +
         (failed > 0 ? ", " + std::to_string(failed) + " failed" : std::string()) + "\n";
  return out;
}

std::function<void(const std::vector<RunStatus>&)> live_runs_table(std::ostream& out) {
  // Shared: a std::function is copied around, and every copy must know the lines drawn last.
  auto drawn_lines = std::make_shared<int>(0);
  return [&out, drawn_lines](const std::vector<RunStatus>& statuses) {
    if (*drawn_lines > 0)
      out << "\033[" << *drawn_lines << "A\033[J";  // up over the last table, clear
    out << status_table(statuses) << std::flush;
    *drawn_lines = static_cast<int>(statuses.size()) + 1;  // the runs and the header
  };
}

}  // namespace minitrain
