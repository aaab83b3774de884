// What `--profile-kernels` costs an op, and what it costs when it is off (core/op_profiler.h: every
// op entry point holds an OpTimer, which without a profiler is one atomic load).
//
// op_profiler/add/N times `add(out, a, b)` on N floats on --device (bench/bench_device.h: the GPU
// when there is one, else the CPU), alternating in every iteration a batch of calls with no
// profiler and a batch with one alive, so both halves see the same machine. The reported time is
// the profiled call's. Counters:
//   off_ns     one call without a profiler (the timer's atomic load included: it cannot be removed
//              without removing the profiler from the build)
//   on_ns      one call with a profiler recording it (two events and a pending row; the batch's
//              interval is closed outside the timed part)
//   on_pct_of_off  100 x on_ns / off_ns
// bare/add/N times the same call in a loop with no profiler ever made: its time against off_ns is
// the off-cost as far as it can be seen.
//
//   minitrain_op_profiler_bench [--device=cpu] [--threads=1]
//   [--benchmark_filter=op_profiler/add/16$]

#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>

#include "bench/bench_device.h"
#include "bench/bench_main.h"
#include "bench/bench_threads.h"
#include "core/device.h"
#include "core/op_profiler.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/elementwise.h"

namespace {

using minitrain::Device;
using minitrain::OpProfiler;
using minitrain::Shape;
using minitrain::Tensor;
using Clock = std::chrono::steady_clock;

constexpr int kCallsPerBatch = 256;

struct Operands {
  Tensor a, b, out;
  Operands(int64_t n, const Device& device)
      : a(Tensor::zeros(Shape{n}, minitrain::DType::Float32, device)),
        b(Tensor::zeros(Shape{n}, minitrain::DType::Float32, device)),
        out(Tensor::zeros(Shape{n}, minitrain::DType::Float32, device)) {}
};

// Seconds for kCallsPerBatch calls, the device drained at the end (a GPU's calls are asynchronous).
double time_batch(Operands& t, const Device& device) {
  const auto start = Clock::now();
  for (int i = 0; i < kCallsPerBatch; ++i) minitrain::add(t.out, t.a, t.b);
  minitrain::synchronize(device);
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void profiled_add(benchmark::State& state, const Device& device) {
  Operands t(state.range(0), device);
  double off = 0.0, on = 0.0;
  for (auto _ : state) {
    off += time_batch(t, device);
    auto profiler = std::make_unique<OpProfiler>();
    const double seconds = time_batch(t, device);
    on += seconds;
    benchmark::DoNotOptimize(profiler->close_interval());
    state.SetIterationTime(seconds);
  }
  const double calls = static_cast<double>(state.iterations()) * kCallsPerBatch;
  state.counters["off_ns"] = off / calls * 1e9;
  state.counters["on_ns"] = on / calls * 1e9;
  state.counters["on_pct_of_off"] = 100.0 * on / off;
}

void bare_add(benchmark::State& state, const Device& device) {
  Operands t(state.range(0), device);
  for (auto _ : state) state.SetIterationTime(time_batch(t, device));
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = minitrain::bench::take_device_flag(argc, argv);
  minitrain::bench::add_device_context(device, minitrain::bench::take_threads_flag(argc, argv, 1));
  for (const int64_t n : {16, 4096, 1 << 20}) {
    benchmark::RegisterBenchmark("op_profiler/add", profiled_add, device)->Arg(n)->UseManualTime();
    benchmark::RegisterBenchmark("bare/add", bare_add, device)->Arg(n)->UseManualTime();
  }
  return minitrain::bench::run_benchmarks(argc, argv);
}
