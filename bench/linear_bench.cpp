// What a Linear layer costs over the bare library calls it makes: forward y = x W^T + b at the
// trainer's MLP shapes (batch 64 and 256 x widths 64..1024), float32.
//   GPU: Linear with backend "cublas" vs a bare cublasSgemm + bias-add kernel on preallocated
//        buffers (the target: within 2%); Linear with "cublaslt" (bias fused into the GEMM's
//        epilogue) beside them. CUDA events after warm-up, L2 flushed
//        (kernels/op_bench/device_timer.h).
//   CPU: Linear ("auto" = openblas) vs a bare gemm_cpu + bias_add_cpu on preallocated buffers;
//        Google Benchmark's real-time loop.
// Counter pct_of_bare: the bare calls' time as a percentage of this run's (100 = no overhead),
// the bare calls measured in the same run for the same shape.
//
//   minitrain_linear_bench [--device=auto|cpu|cuda] [--threads=N]

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_device.h"
#include "bench/bench_threads.h"
#include "kernels/op_bench/device_timer.h"
#include "core/generator.h"
#include "kernels/bias_add.h"
#include "kernels/gemm/gemm.h"
#include "nn/linear.h"

#if MINITRAIN_WITH_CUDA
#include "core/blas_handle.h"
#include "core/cuda_check.h"
#include "core/stream.h"
#endif

namespace {

using minitrain::Device;
using minitrain::Tensor;

struct Case {
  int64_t batch, width;
  std::string name() const { return "b" + std::to_string(batch) + "_w" + std::to_string(width); }
};

// The layer and its input, on the device; the bare calls use the same weight, bias and input.
struct Setup {
  minitrain::Generator gen{1};
  minitrain::Linear layer;
  Tensor x, y;
  Setup(const Case& c, Device d)
      : layer(c.width, c.width, gen, true, d),
        x(minitrain::bench::filled(c.batch, c.width, 3).to(d)),
        y(Tensor::empty({c.batch, c.width}, minitrain::DType::Float32, d)) {
    layer.eval();  // forward keeps no input: the timing is the forward alone
  }
};

// y = x W^T + b through the libraries directly, on raw pointers.
void bare_forward(Setup& s, Device d) {
  const int64_t m = s.x.size(0), n = s.layer.out_features(), k = s.layer.in_features();
  const float* w = s.layer.weight().value.data<float>();
  const float* b = s.layer.bias().value.data<float>();
  float* y = s.y.data<float>();
  if (d.is_cpu()) {
    minitrain::gemm_cpu<float>(y, s.x.data<float>(), false, w, true, m, n, k, 1.f, 0.f);
    minitrain::bias_add_cpu<float>(y, y, b, m, n);
    return;
  }
#if MINITRAIN_WITH_CUDA
  // Column-major y^T[n, m] = W[n, k] x^T[k, m]: row-major W read transposed, row-major x as is.
  const float one = 1.f, zero = 0.f;
  CHECK_CUBLAS(cublasSgemm(minitrain::cublas_handle(d), CUBLAS_OP_T, CUBLAS_OP_N, int(n), int(m),
                           int(k), &one, w, int(k), s.x.data<float>(), int(k), &zero, y, int(n)));
  minitrain::bias_add_cuda<float>(y, y, b, m, n, minitrain::current_stream(d).native_handle());
#endif
}

std::map<std::string, double>& bare_seconds() {
  static std::map<std::string, double> table;
  return table;
}

// Seconds per call of `work` over the benchmark's iterations.
double timed_loop(benchmark::State& state, Device d, const std::function<void()>& work) {
  double seconds = 0;
  if (d.is_cuda()) {
    minitrain::bench::DeviceTimer timer(d);
    for (auto _ : state) {
      const double s = timer.time_seconds(work);
      state.SetIterationTime(s);
      seconds += s;
    }
  } else {
    work();  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (auto _ : state) {
      work();
      benchmark::ClobberMemory();
    }
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return seconds / double(state.iterations());
}

// Seconds per call of `work` over `runs` calls timed as the benchmarks time them: per call with
// events on a GPU, the whole loop with the host clock on the CPU.
double mean_seconds(Device d, const std::function<void()>& work, int runs) {
  return minitrain::bench::mean_call_seconds(d, work, runs);
}

void run_bare(benchmark::State& state, const Case& c, Device d) {
  Setup s(c, d);
  bare_seconds()[c.name()] = timed_loop(state, d, [&] { bare_forward(s, d); });
  state.counters["pct_of_bare"] = 100.0;
}

void run_linear(benchmark::State& state, const Case& c, Device d, const std::string& backend) {
  Setup s(c, d);
  s.layer.set_gemm_backend(backend);
  try {
    const double t =
        timed_loop(state, d, [&] { benchmark::DoNotOptimize(s.layer.forward(s.x).raw_data()); });
    double& bare = bare_seconds()[c.name()];
    if (bare == 0)
      bare = mean_seconds(
          d, [&] { bare_forward(s, d); }, 50);  // filtered out: time it here
    state.counters["pct_of_bare"] = 100.0 * bare / t;
  } catch (const minitrain::Error& e) {
    state.SkipWithError(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Device d = minitrain::bench::take_device_flag(argc, argv);
    const int threads = minitrain::bench::take_threads_flag(argc, argv, minitrain::num_threads());
    minitrain::bench::add_device_context(d, threads);
    const char* bare_name = d.is_cuda() ? "bare_cublasSgemm_bias" : "bare_gemm_cpu_bias";
    for (int64_t batch : {64, 256})
      for (int64_t width : {64, 128, 256, 512, 1024}) {
        const Case c{batch, width};
        std::vector<std::pair<std::string, std::function<void(benchmark::State&)>>> runs = {
            {bare_name, [c, d](benchmark::State& s) { run_bare(s, c, d); }},
            {d.is_cuda() ? "linear_cublas" : "linear_auto", [c, d](benchmark::State& s) {
               run_linear(s, c, d, d.is_cuda() ? "cublas" : "auto");
             }}};
        if (d.is_cuda())
          runs.push_back({"linear_cublaslt_fused",
                          [c, d](benchmark::State& s) { run_linear(s, c, d, "cublaslt"); }});
        for (auto& [name, fn] : runs) {
          auto* b =
              benchmark::RegisterBenchmark(("linear_forward/" + c.name() + "/" + name).c_str(), fn);
          b->Unit(benchmark::kMicrosecond);
          if (d.is_cuda())
            b->UseManualTime();
          else
            b->UseRealTime();
        }
      }
    return minitrain::bench::run_benchmarks(argc, argv);
  } catch (const minitrain::Error& e) {
    std::fprintf(stderr, "minitrain_linear_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
