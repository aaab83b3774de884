#include "train/kernel_profile.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/device.h"

namespace minitrain {
namespace {

const char* timing_of(const Device& d) {
  if (d.is_cpu()) return "host clock";
  return cuda_emulated() ? "emulated GPU events: the emulator's time, not a GPU's" : "CUDA events";
}

}  // namespace

KernelProfile::KernelProfile(const std::string& path) : file_(path) {}

void KernelProfile::end_step(int64_t step) {
  const OpProfiler::Interval interval = profiler_.close_interval();
  double in_ops = 0.0;
  std::string text;
  for (const OpProfiler::Row& r : interval.rows) {
    // A GPU op overlaps the host's work that follows its launch, so only ops on the CPU are
    // subtracted from the interval's wall time for the "(outside any op)" row.
    if (r.device.is_cpu()) in_ops += r.seconds;
    const auto key = std::make_pair(r.op, r.device.str());
    auto it = totals_.find(key);
    if (it == totals_.end()) {
      order_.push_back(key);
      it = totals_.emplace(key, Total{}).first;
    }
    it->second.calls += r.calls;
    it->second.seconds += r.seconds;
    nlohmann::json line = {{"step", step},
                           {"op", r.op},
                           {"device", key.second},
                           {"calls", r.calls},
                           {"ms", r.seconds * 1e3},
                           {"step_ms", interval.wall_seconds * 1e3},
                           {"timing", timing_of(r.device)}};
    text += line.dump() + "\n";
  }
  const double outside = std::max(0.0, interval.wall_seconds - in_ops);
  nlohmann::json line = {{"step", step},          {"op", "(outside any op)"},
                         {"device", "cpu"},       {"calls", 0},
                         {"ms", outside * 1e3},   {"step_ms", interval.wall_seconds * 1e3},
                         {"timing", "host clock"}};
  text += line.dump() + "\n";
  file_.write(text);
  ++steps_;
  step_seconds_ += interval.wall_seconds;
  outside_seconds_ += outside;
}

std::string KernelProfile::finish(int top) {
  std::vector<std::pair<std::string, std::string>> ranked = order_;
  std::stable_sort(ranked.begin(), ranked.end(), [&](const auto& a, const auto& b) {
    return totals_.at(a).seconds > totals_.at(b).seconds;
  });
  const double per = steps_ > 0 ? 1.0 / double(steps_) : 0.0;
  nlohmann::json tops = nlohmann::json::array();
  std::ostringstream out;
  out << std::fixed;
  out << "kernel profile: " << steps_ << " step(s), " << std::setprecision(3)
      << step_seconds_ * per * 1e3 << " ms per step; the top ops by share of the step:\n";
  out << "  " << std::left << std::setw(34) << "op" << std::setw(10) << "device" << std::right
      << std::setw(10) << "calls" << std::setw(12) << "ms/step" << std::setw(9) << "share"
      << "\n";
  auto row = [&](const std::string& op, const std::string& device, double calls, double ms,
                 double share) {
    out << "  " << std::left << std::setw(34) << op << std::setw(10) << device << std::right
        << std::setw(10) << std::setprecision(1) << calls << std::setw(12) << std::setprecision(4)
        << ms << std::setw(8) << std::setprecision(1) << share * 100 << "%\n";
  };
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    const Total& t = totals_.at(ranked[i]);
    const double share = step_seconds_ > 0 ? t.seconds / step_seconds_ : 0.0;
    tops.push_back({{"op", ranked[i].first},
                    {"device", ranked[i].second},
                    {"calls_per_step", double(t.calls) * per},
                    {"ms_per_step", t.seconds * per * 1e3},
                    {"share", share}});
    if (int(i) < top)
      row(ranked[i].first, ranked[i].second, double(t.calls) * per, t.seconds * per * 1e3, share);
  }
  const double outside_share = step_seconds_ > 0 ? outside_seconds_ / step_seconds_ : 0.0;
  row("(outside any op)", "cpu", 0, outside_seconds_ * per * 1e3, outside_share);
  bool any_gpu = false, emulated = false;
  for (const auto& key : order_)
    if (key.second != "cpu") any_gpu = true;
  emulated = any_gpu && cuda_emulated();
  if (any_gpu)
    out << "  (GPU ops overlap the host's work, so shares need not sum to 100%"
        << (emulated ? "; on emulated GPUs the times are the emulator's, not a GPU's: "
                       "MINITRAIN_EMU_COUNTERS gives the modelled ones"
                     : "")
        << ")\n";
  nlohmann::json summary = {{"summary",
                             {{"steps", steps_},
                              {"ms_per_step", step_seconds_ * per * 1e3},
                              {"outside_ms_per_step", outside_seconds_ * per * 1e3},
                              {"outside_share", outside_share},
                              {"top", tops}}}};
  file_.write(summary.dump() + "\n");
  file_.commit();
  return out.str();
}

}  // namespace minitrain
