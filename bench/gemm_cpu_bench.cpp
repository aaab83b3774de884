// CPU GEMM, float32, three ways on the same operands, interleaved per shape:
//   minitrain: minitrain::gemm (OpenBLAS single-threaded kernels on minitrain's OpenMP threads),
//   openblas:  cblas_sgemm with OpenBLAS's own thread pool (the reference),
//   eigen:     Eigen's product on row-major Maps (OpenMP threads; minitrain's first CPU path).
// Shapes: squares 64..1024, and the three GEMMs of an MLP layer at batch 256 (forward x W^T,
// backward dy W and dy^T x) for widths 64..1024. Compute-bound: GFLOP/s (2mnk per GEMM); the
// summary prints each and minitrain / OpenBLAS.
//
//   minitrain_gemm_cpu_bench --threads=2 [--benchmark_filter=mlp] [--benchmark_repetitions=3]

#include <Eigen/Core>
#include <benchmark/benchmark.h>

#include "bench/bench_main.h"
#include "bench/bench_threads.h"
#include "bench/cpu_peak.h"
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/parallel_for.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace {

using minitrain::Shape;
using minitrain::Tensor;

struct Case {
  std::string name;
  int64_t m, n, k;
  bool trans_a, trans_b;
  bool then_relu = false;  // follow each GEMM with an OpenMP elementwise pass over C
};

std::vector<Case> cases() {
  std::vector<Case> out;
  for (int64_t s : {64, 128, 256, 512, 1024})
    out.push_back({"square_" + std::to_string(s), s, s, s, false, false});
  const int64_t batch = 256;
  for (int64_t w : {64, 128, 256, 512, 1024}) {
    const std::string p = "mlp_b256_w" + std::to_string(w);
    out.push_back({p + "_fwd_xWt", batch, w, w, false, true});   // y[b,out] = x[b,in] W[out,in]^T
    out.push_back({p + "_bwd_dyW", batch, w, w, false, false});  // dx[b,in] = dy[b,out] W[out,in]
    out.push_back({p + "_bwd_dytx", w, w, batch, true, false});  // dW[out,in] = dy^T x
  }
  // A GEMM followed by minitrain's OpenMP elementwise loop, as in a Linear + ReLU forward: shows
  // whether OpenBLAS's own thread pool and OpenMP's contend for the cores when they alternate.
  for (int64_t w : {256, 1024})
    out.push_back({"mlp_b256_w" + std::to_string(w) + "_fwd_relu", batch, w, w, false, true, true});
  return out;
}

struct Operands {
  Tensor a, b, c;
};

Operands make_operands(const Case& g) {
  // Values in [-1, 1); the timing does not depend on them, only on keeping them finite.
  auto filled = [](const Shape& s, uint32_t seed) {
    std::vector<float> v(static_cast<size_t>(s.numel()));
    uint32_t x = seed;
    for (float& f : v) {
      x = x * 1664525u + 1013904223u;
      f = static_cast<float>(x >> 8) / float(1 << 24) * 2.f - 1.f;
    }
    return Tensor::from_vector(v, s);
  };
  return {filled(g.trans_a ? Shape{g.k, g.m} : Shape{g.m, g.k}, 1),
          filled(g.trans_b ? Shape{g.n, g.k} : Shape{g.k, g.n}, 2), Tensor::zeros(Shape{g.m, g.n})};
}

void relu_inplace(Tensor& c) {
  float* p = c.data<float>();
  minitrain::parallel_for(c.numel(), minitrain::kElementwiseGrain, [p](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = p[i] > 0.f ? p[i] : 0.f;
  });
}

int g_threads = 1;  // both libraries' threads (--threads)

using Clock = std::chrono::steady_clock;

// `start`: when the case's timed loop began (its wall time gives the share of the peak).
void set_counters(benchmark::State& state, const Case& g, Clock::time_point start) {
  const std::chrono::duration<double> wall = Clock::now() - start;
  state.SetItemsProcessed(state.iterations());  // items/s = GEMMs per second
  const double gflop = 2.0 * double(g.m) * double(g.n) * double(g.k) * 1e-9;
  state.counters["GFLOP/s"] =
      benchmark::Counter(gflop, benchmark::Counter::kIsIterationInvariantRate);
  // Against the hardware (Note [peak FP32]): a library's own rate can hide a slow kernel.
  state.counters["pct_of_peak"] =
      minitrain::bench::pct_of_peak(gflop * double(state.iterations()) / wall.count(), g_threads);
}

void run_minitrain(benchmark::State& state, const Case& g) {
  Operands o = make_operands(g);
  const auto start = Clock::now();
  for (auto _ : state) {
    minitrain::gemm(o.c, o.a, g.trans_a, o.b, g.trans_b);
    if (g.then_relu) relu_inplace(o.c);
    benchmark::DoNotOptimize(o.c.raw_data());
    benchmark::ClobberMemory();
  }
  set_counters(state, g, start);
}

// minitrain runs OpenBLAS single-threaded (Note [OpenBLAS on OpenMP threads] in
// kernels/gemm/gemm.cpp); the reference gets the pool for its run and gives it back.

void run_openblas(benchmark::State& state, const Case& g) {
  Operands o = make_operands(g);
  openblas_set_num_threads(g_threads);
  const int lda = int(g.trans_a ? g.m : g.k), ldb = int(g.trans_b ? g.k : g.n);
  const auto start = Clock::now();
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
                g.trans_b ? CblasTrans : CblasNoTrans, int(g.m), int(g.n), int(g.k), 1.f,
                o.a.data<float>(), lda, o.b.data<float>(), ldb, 0.f, o.c.data<float>(), int(g.n));
    if (g.then_relu) relu_inplace(o.c);
    benchmark::DoNotOptimize(o.c.raw_data());
    benchmark::ClobberMemory();
  }
  openblas_set_num_threads(1);
  set_counters(state, g, start);
}

template <bool TA, bool TB>
void eigen_product(Eigen::Map<Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>& C,
                   const Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>& A,
                   const Eigen::Map<const Eigen::Matrix<float, -1, -1, Eigen::RowMajor>>& B) {
  if constexpr (!TA && !TB) C.noalias() = A * B;
  if constexpr (!TA && TB) C.noalias() = A * B.transpose();
  if constexpr (TA && !TB) C.noalias() = A.transpose() * B;
  if constexpr (TA && TB) C.noalias() = A.transpose() * B.transpose();
}

void run_eigen(benchmark::State& state, const Case& g) {
  Operands o = make_operands(g);
  using Matrix = Eigen::Matrix<float, -1, -1, Eigen::RowMajor>;
  Eigen::Map<const Matrix> A(o.a.data<float>(), o.a.size(0), o.a.size(1));
  Eigen::Map<const Matrix> B(o.b.data<float>(), o.b.size(0), o.b.size(1));
  Eigen::Map<Matrix> C(o.c.data<float>(), g.m, g.n);
  const auto start = Clock::now();
  for (auto _ : state) {
    if (!g.trans_a && !g.trans_b) eigen_product<false, false>(C, A, B);
    if (!g.trans_a && g.trans_b) eigen_product<false, true>(C, A, B);
    if (g.trans_a && !g.trans_b) eigen_product<true, false>(C, A, B);
    if (g.trans_a && g.trans_b) eigen_product<true, true>(C, A, B);
    if (g.then_relu) relu_inplace(o.c);
    benchmark::DoNotOptimize(o.c.raw_data());
    benchmark::ClobberMemory();
  }
  set_counters(state, g, start);
}

// Prints the usual table, then one row per shape: both GFLOP/s and minitrain / OpenBLAS
// (medians when --benchmark_repetitions is given).
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& r : runs) {
      if (r.error_occurred) continue;
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      const std::string name = r.run_name.function_name;  // "gemm/<case>/<lib>"
      const auto slash = name.rfind('/');
      const std::string shape = name.substr(5, slash - 5), lib = name.substr(slash + 1);
      auto it = r.counters.find("GFLOP/s");
      if (it == r.counters.end()) continue;
      Entry& e = results_[shape];
      if (median || !e.from_median[lib]) e.gflops[lib] = it->second.value;
      if (median) e.from_median[lib] = true;
      if (std::find(order_.begin(), order_.end(), shape) == order_.end()) order_.push_back(shape);
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    std::FILE* f = stdout;
    std::fprintf(f, "\nGFLOP/s%20s %10s %10s %10s %12s\n", "", "minitrain", "OpenBLAS", "Eigen",
                 "mt/OpenBLAS");
    for (const std::string& shape : order_) {
      Entry& e = results_[shape];
      const double mt = e.gflops["minitrain"], ob = e.gflops["openblas"], eg = e.gflops["eigen"];
      std::fprintf(f, "%-27s %10.1f %10.1f %10.1f %11.2fx\n", shape.c_str(), mt, ob, eg,
                   ob > 0 ? mt / ob : 0.0);
    }
  }

 private:
  struct Entry {
    std::map<std::string, double> gflops;
    std::map<std::string, bool> from_median;
  };
  std::map<std::string, Entry> results_;
  std::vector<std::string> order_;
};

}  // namespace

int main(int argc, char** argv) {
  // --threads=N sets both libraries' thread count (default: minitrain's default, the cores).
  const int threads = minitrain::bench::take_threads_flag(argc, argv, minitrain::num_threads());
  g_threads = threads;
  benchmark::AddCustomContext("threads (minitrain and OpenBLAS)", std::to_string(threads));
  benchmark::AddCustomContext("OpenBLAS", openblas_get_config());
  minitrain::bench::add_cpu_context(threads);

  for (const Case& g : cases()) {
    benchmark::RegisterBenchmark(("gemm/" + g.name + "/minitrain").c_str(),
                                 [g](benchmark::State& s) { run_minitrain(s, g); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("gemm/" + g.name + "/openblas").c_str(),
                                 [g](benchmark::State& s) { run_openblas(s, g); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("gemm/" + g.name + "/eigen").c_str(),
                                 [g](benchmark::State& s) { run_eigen(s, g); })
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
  }

  RatioReporter reporter;
  return minitrain::bench::run_benchmarks(argc, argv, &reporter);
}
