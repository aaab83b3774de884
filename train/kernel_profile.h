#pragma once
// `minitrain train --profile-kernels FILE`: the time of every op of every step, and a summary.
//
// FILE gets one JSON line per op and step, then one summary line:
//   {"step":3,"op":"linear_activation_forward","device":"cpu","calls":2,"ms":0.041,
//    "step_ms":0.193,"timing":"host clock"}
//   {"step":3,"op":"(outside any op)","device":"cpu","calls":0,"ms":0.052,"step_ms":0.193,...}
//   {"summary":{"steps":100,"ms_per_step":0.19,"outside_ms_per_step":0.05,"top":[{"op":...,
//    "device":...,"calls_per_step":2,"ms_per_step":0.04,"share":0.21},...]}}
// A step's interval runs from the end of the step before (or the start of the run) to the end of
// this one, so evaluations and checkpoints fall into the step that did them; its rows sum to
// step_ms, and what no op timed (the host's own work: the loader, the loop, logging) is the
// "(outside any op)" row. Ops are core/op_profiler.h's: every kernel entry point and the Linear
// layers' GEMM with its epilogue (one row each, what they call inside them). Timing: the host clock
// on the CPU; CUDA events on a GPU (one host sync per step while profiling); on emulated GPUs the
// events measure the emulator, not a GPU ("timing" says so: MINITRAIN_EMU_COUNTERS gives their
// exact memory counters and the modelled time, docs/emulator_counters.md).
//
// The file is written to a temporary beside FILE and renamed over it when the run ends (a
// stopped run too); a run that fails leaves FILE as it was.

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/op_profiler.h"

namespace minitrain {

class KernelProfile {
 public:
  /// Starts profiling every op of this process (one KernelProfile at a time) into `path`.
  explicit KernelProfile(const std::string& path);

  /// Ends step `step`'s interval and writes its rows.
  void end_step(int64_t step);

  /// Writes the summary line, renames the file into place and returns the summary's text: the
  /// top `top` ops by share of the step, for the console.
  std::string finish(int top = 10);

 private:
  struct Total {
    int64_t calls = 0;
    double seconds = 0.0;
  };
  OpProfiler profiler_;
  AtomicFile file_;
  std::string timing_;
  int64_t steps_ = 0;
  double step_seconds_ = 0.0, outside_seconds_ = 0.0;
  std::vector<std::pair<std::string, std::string>> order_;  // (op, device) by first appearance
  std::map<std::pair<std::string, std::string>, Total> totals_;
};

}  // namespace minitrain
