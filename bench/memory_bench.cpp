// Memory-bound kernels: GB/s (bytes read + written per call / time) of every op of the
// op-variant registry (kernels/op_bench/op_registry.h, one file per op family in
// kernels/op_bench/ops/: copy, the elementwise ops, activations, reductions, fused MSE, fused
// bias + activation, the fused Adam step, ...) and each of its variants, with the counter
// pct_of_copy: the variant's GB/s over a plain copy's GB/s (cudaMemcpyAsync device to device on a
// GPU, std::memcpy in chunks over the CPU threads on the CPU) of the same tensor size, measured in
// the same run. A memory-bound kernel near 100% moves bytes as fast as the memory system allows.
// Sizes are bytes of one float32 operand, 4 KiB .. 1 GiB on a GPU, 4 KiB .. 256 MiB on the CPU.
// GPU times are CUDA events after warm-up with L2 flushed before each timed run
// (kernels/op_bench/device_timer.h); small sizes are bound by launch latency, not bandwidth.
// Before anything is timed every variant is verified against its op's CPU reference at an odd
// size; a wrong one is named on stderr, not benchmarked, and the program exits 1.
// Unfused compositions (mse_forward_backward.unfused, bias_gelu.unfused) count the fused kernel's
// bytes, so their lower GB/s is what fusing saves. In builds with the vendor libraries, cuDNN's
// activation forward/backward (relu_forward.cudnn, ...) is the baseline for the activation rows.
// Benchmarks are named memory/<op>.<variant>/<size>.
//
//   minitrain_memory_bench [--device=cpu|cuda] [--threads=N] [--benchmark_filter=adam]

#include <benchmark/benchmark.h>

#include <cstdio>
#include <string>

#include "bench/bench_device.h"
#include "bench/bench_main.h"
#include "bench/bench_threads.h"
#include "core/device.h"
#include "kernels/op_bench/device_timer.h"
#include "kernels/op_bench/op_registry.h"

namespace {

using minitrain::Device;
using minitrain::opbench::OpFamily;
using minitrain::opbench::OpVariant;

void run(benchmark::State& state, const OpFamily& op, const OpVariant& v, Device d, int64_t n) {
  minitrain::opbench::OpTensors t = op.make(n, d);
  minitrain::bench::DeviceTimer timer(d);
  double seconds = 0;
  for (auto _ : state) {
    const double s = timer.time_seconds([&] { v.run(t); });
    state.SetIterationTime(s);
    seconds += s;
  }
  const double bytes = minitrain::opbench::variant_bytes(op, v, n);
  state.SetBytesProcessed(static_cast<int64_t>(bytes * double(state.iterations())));
  const double gbps = bytes * double(state.iterations()) / seconds / 1e9;
  const double copy_gbps = 2.0 * double(n) * 4.0 / minitrain::opbench::copy_seconds(d, n) / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["copy_GB/s"] = copy_gbps;
  state.counters["pct_of_copy"] = 100.0 * gbps / copy_gbps;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = minitrain::bench::take_device_flag(argc, argv);
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  minitrain::bench::add_device_context(device, threads);

  // Verify first, at an odd size (matrix ops get odd rows and columns): never time a wrong one.
  constexpr int64_t kVerifySize = 4095;  // [5, 819] for the matrix ops
  int wrong = 0;
  // 4 KiB (1024 floats) .. 1 GiB on a GPU, .. 256 MiB on the CPU, by factors of 4.
  const int64_t max_bytes = device.is_cuda() ? int64_t(1) << 30 : int64_t(256) << 20;
  for (const std::string& name : minitrain::opbench::op_names()) {
    const OpFamily& op = minitrain::opbench::op_family(name);
    for (const OpVariant& v : op.variants) {
      if (!minitrain::opbench::runs_on(v, device.type())) continue;
      const minitrain::opbench::Verification check =
          minitrain::opbench::verify_variant(op, v, device, kVerifySize);
      if (!check.ok()) {
        std::fprintf(stderr, "minitrain_memory_bench: %s.%s is WRONG: max error %g > %g (%s)\n",
                     op.name.c_str(), v.name.c_str(), check.max_error, check.tolerance,
                     check.where.c_str());
        ++wrong;
        continue;
      }
      for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
        const int64_t n = bytes / 4;
        const std::string size = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + "MiB"
                                                    : std::to_string(bytes >> 10) + "KiB";
        benchmark::RegisterBenchmark(
            ("memory/" + op.name + "." + v.name + "/" + size).c_str(),
            [&op, &v, device, n](benchmark::State& s) { run(s, op, v, device, n); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  const int code = minitrain::bench::run_benchmarks(argc, argv);
  return wrong > 0 ? 1 : code;
}
