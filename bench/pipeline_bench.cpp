// GPipe pipeline step time: forward + backward (with re-materialisation) of an MLP split into
// 1..4 stages with 1, 4 or 8 micro-batches. mlp:512x7 (six Linear 512x512 + ReLU), batch 256,
// float32, stages on the CPU (one thread each). The ideal speed-up over one stage is bounded by
// the bubble, S / (1 + (S-1)/M) at best, and on the CPU by the cores: with 2 cores, 3 and 4 stages
// only share them. The figures that matter come from GPU stages; this measures the schedule's
// overhead (threads, micro-batch copies, the extra forward of re-materialisation).
//
//   minitrain_pipeline_bench [--threads=N]   (CPU threads per stage's kernels; default 1)

#include <benchmark/benchmark.h>

#include "bench/bench_main.h"
#include "bench/bench_threads.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "parallel/model_parallel.h"

namespace {

using minitrain::Tensor;

constexpr int64_t kWidth = 512, kLinears = 6, kBatch = 256;

// Values in [-1, 1) from a fixed LCG: the timing does not depend on them.
Tensor filled(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / float(1 << 24) * 2.f - 1.f;
  }
  return Tensor::from_vector(v, minitrain::Shape{rows, cols});
}

void pipeline_step(benchmark::State& state) {
  const int stages = static_cast<int>(state.range(0));
  const int micro = static_cast<int>(state.range(1));
  minitrain::Generator gen(0);
  std::vector<int64_t> sizes(kLinears + 1, kWidth);
  auto model = minitrain::make_mlp(sizes, minitrain::Activation::ReLU, gen);
  model->set_needs_input_grad(false);  // data input: as the trainer runs it
  minitrain::ModelParallel mp(std::move(model), stages, micro, {minitrain::Device::cpu()});
  Tensor x = filled(kBatch, kWidth, 1), t = filled(kBatch, kWidth, 2);
  minitrain::MSELoss loss;
  auto step = [&] {
    mp.zero_grad();
    loss.forward(mp.forward(x), t);
    mp.backward(loss.backward());
  };
  step();  // warm-up: gradients allocated, worker threads running
  for (auto _ : state) step();
  state.SetItemsProcessed(state.iterations() * kBatch);
  state.counters["bubble_fraction"] = mp.bubble_fraction();
  state.counters["stages"] = stages;
  state.counters["micro_batches"] = micro;
}

BENCHMARK(pipeline_step)
    ->ArgNames({"stages", "micro"})
    ->ArgsProduct({{1, 2, 3, 4}, {1, 4, 8}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  minitrain::bench::take_threads_flag(argc, argv, 1);
  return minitrain::bench::run_benchmarks(argc, argv);
}
