#pragma once
// Per-op timing, for `minitrain train --profile-kernels` (train/kernel_profile.h writes it out).
//
// Every op entry point that runs through kernels/dispatch.h's on_device, and the GEMM entry point,
// holds an OpTimer for as long as it runs. While an OpProfiler exists, each timer records two
// events around the op on the device's current stream: host clock readings on the CPU, CUDA
// events on a GPU (so the GPU time is the op's kernels, not the launch). Without one, a timer
// costs an atomic load. Only the outermost timer of a thread counts (an op that calls another op
// is one row), so the rows of an interval never count a microsecond twice.
//
// close_interval() ends an interval (in training: one step to the next) and returns its rows: per
// op and device, the calls and their summed time. On a GPU it waits for the interval's last events
// (one host sync per interval, only while profiling).

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stream.h"

namespace minitrain {

class OpProfiler {
 public:
  /// One op's calls in an interval, on one device.
  struct Row {
    std::string op;
    Device device;
    int64_t calls = 0;
    double seconds = 0.0;
  };
  struct Interval {
    double wall_seconds = 0.0;  ///< since the previous close_interval() (or construction)
    std::vector<Row> rows;      ///< in the order the ops first ran in the interval
  };

  /// Becomes the process's profiler; DeviceError if another one exists.
  OpProfiler();
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;

  /// The profiler timers report to, or null.
  static OpProfiler* active() noexcept;

  /// Ends the interval: waits for its GPU events and sums them per op and device.
  Interval close_interval();

  /// Called by OpTimer: one op's start and stop, recorded on the same stream.
  void add(const char* op, Event start, Event stop);

 private:
  struct Pending {
    const char* op;
    Event start, stop;
  };
  std::mutex mutex_;
  std::vector<Pending> pending_;
  std::chrono::steady_clock::time_point interval_start_;
};

/// Times the op it lives around, while an OpProfiler exists (see the file comment).
class OpTimer {
 public:
  OpTimer(const char* op, const Device& device);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  struct Started;
  std::unique_ptr<Started> started_;  // null when not recording
};

}  // namespace minitrain
