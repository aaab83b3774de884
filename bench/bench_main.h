#pragma once
// The tail of every Google Benchmark program's main, once: after the program has registered its
// benchmarks, parse Google Benchmark's flags (refusing unknown ones), run, shut down.
//
//   int main(int argc, char** argv) {
//     ... benchmark::RegisterBenchmark(...);
//     return minitrain::bench::run_benchmarks(argc, argv);
//   }

#include <benchmark/benchmark.h>

namespace minitrain::bench {

/// 0 when the benchmarks ran, 1 for an unrecognised flag. `display` replaces the console
/// reporter when given (bench/gemm_cpu_bench.cpp's ratio columns).
inline int run_benchmarks(int argc, char** argv, benchmark::BenchmarkReporter* display = nullptr) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (display != nullptr)
    benchmark::RunSpecifiedBenchmarks(display);
  else
    benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace minitrain::bench
