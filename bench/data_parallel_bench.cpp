// Data-parallel training step on CPU replicas: one step (forward, MSE, backward with the gradient
// all-reduce, every replica's optimizer step) of mlp:64,W,W,16 on a global batch of 512, with 1,
// 2 and 4 replicas. Each replica's kernels get --threads (default 1), so R replicas use R threads:
// samples/s against the 1-replica row is the scaling. On a 2-core machine it is bounded by 2, and
// more replicas than cores only add contention; the same program measures GPUs with --devices.
//
//   minitrain_data_parallel_bench [--threads=1] [--benchmark_filter=w512]

#include <benchmark/benchmark.h>

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"
#include "core/generator.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "parallel/data_parallel.h"

namespace {

using namespace minitrain;

constexpr int64_t kIn = 64, kOut = 16, kBatch = 512;

void data_parallel_step(benchmark::State& state, int64_t width, int replicas) {
  auto make_replica = [width](Device d) -> std::unique_ptr<Module> {
    Generator gen(0);
    auto m = make_mlp({kIn, width, width, kOut}, Activation::ReLU, gen, d);
    m->set_needs_input_grad(false);
    return m;
  };
  DataParallel model(make_replica,
                     std::vector<Device>(static_cast<size_t>(replicas), Device::cpu()));
  auto opt = model.make_optimizer(bench::optimizer_config("adam"));
  MSELoss loss_fn;
  const Tensor x = bench::filled(kBatch, kIn, 1), y = bench::filled(kBatch, kOut, 2);
  double loss = 0;
  for (auto _ : state) {
    Tensor l = loss_fn.forward(model.forward(x), y);
    opt->zero_grad();
    model.backward(loss_fn.backward());
    opt->step();
    loss = l.item();
    benchmark::DoNotOptimize(loss);
  }
  state.counters["samples/s"] =
      benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["replicas"] = replicas;
  state.counters["loss"] = loss;  // finite: the step did real work
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench::take_threads_flag(argc, argv, 1);
  benchmark::AddCustomContext("threads per replica", std::to_string(threads));
  benchmark::AddCustomContext("model", "mlp:64,W,W,16 relu, batch 512, Adam, CPU replicas");
  for (int64_t w : {256, 1024})
    for (int r : {1, 2, 4})
      benchmark::RegisterBenchmark(
          ("data_parallel/w" + std::to_string(w) + "/replicas" + std::to_string(r)).c_str(),
          [w, r](benchmark::State& s) { data_parallel_step(s, w, r); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  return minitrain::bench::run_benchmarks(argc, argv);
}
