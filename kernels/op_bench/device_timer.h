#pragma once
// Timing device work the way GPU kernel benchmarks are timed: CUDA events around the work on the
// current stream (so host launch overhead between runs is not counted), after a warm-up, with the
// L2 cache flushed before each timed run (a write over a buffer larger than any H100/H200 L2, 50
// MiB and 60 MiB) so that a kernel does not read its inputs from the previous run's cache. Feeds
// Google Benchmark's manual timing:
//
//   for (auto _ : state) state.SetIterationTime(timer.time_seconds([&] { my_kernel(...); }));
//
// On the CPU the same calls time with host clocks (core/stream.h's CPU events), without a flush.
// Used by bench/ and by `minitrain bench op` (kernels/op_bench/op_registry.h).
#include <chrono>
#include <cstdint>
#include <functional>

#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/fill.h"

namespace minitrain::bench {

class DeviceTimer {
 public:
  explicit DeviceTimer(Device device, bool flush_l2 = true, int warmup = 2)
      : device_(device), warmup_(warmup) {
    if (flush_l2 && device.is_cuda())
      flush_ = Tensor::empty({kFlushBytes / 4}, DType::Float32, device);
  }

  /// Seconds `work` took on the device, measured between two events on the current stream.
  double time_seconds(const std::function<void()>& work) {
    for (; warmup_ > 0; --warmup_) work();
    if (flush_.defined()) fill(flush_, 0.0);
    const Stream& s = current_stream(device_);
    Event start = Event::create(device_), stop = Event::create(device_);
    start.record(s);
    work();
    stop.record(s);
    stop.synchronize();
    return stop.elapsed_ms_since(start) / 1e3;
  }

 private:
  static constexpr int64_t kFlushBytes = int64_t(256) << 20;  // well above the 50-60 MiB L2
  Device device_;
  int warmup_;
  Tensor flush_;
};

/// Mean seconds per call of `work` over at least `runs` calls, after one warm-up call, timed as
/// the benchmarks time it: per call with events (L2 flushed) on a GPU; on the CPU the whole loop
/// with the host clock, at least `min_seconds` long, so that the same share of the host's other
/// work falls into every measurement. The one timing loop of bench/gemm_bench.cpp,
/// bench/linear_bench.cpp, bench/memory_bench.cpp and `minitrain bench op`.
inline double mean_call_seconds(Device d, const std::function<void()>& work, int runs,
                                double min_seconds = 0.2, bool flush_l2 = true) {
  if (runs < 1) runs = 1;
  work();  // warm-up
  if (d.is_cuda()) {
    DeviceTimer timer(d, flush_l2);
    double total = 0;
    for (int i = 0; i < runs; ++i) total += timer.time_seconds(work);
    return total / runs;
  }
  const auto t0 = std::chrono::steady_clock::now();
  int64_t calls = 0;
  double elapsed = 0;
  for (; calls < runs || elapsed < min_seconds; ++calls) {
    work();
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return elapsed / double(calls);
}

}  // namespace minitrain::bench
