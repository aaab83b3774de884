// One CPU training step of an MLP, end to end: forward (three Linear layers, two ReLUs), MSE loss
// (mean), zero_grad, backward, optimizer step, on one fixed batch held in memory (the loader is
// not timed). Models mlp:64,W,W,16 for W in 64..1024, batch 256 and 64, float32. Small widths are
// bound by per-op overhead and the elementwise passes, large ones by the six GEMMs.
// bench/torch_train_step.py times the same steps in PyTorch; bench/compare_train_step.sh runs
// both and prints minitrain / torch.
//
//   minitrain_train_step_bench --threads=2 [--benchmark_filter=adam] [--benchmark_repetitions=5]

#include <benchmark/benchmark.h>

#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/parallel_for.h"
#include "core/tensor.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"

namespace {

using minitrain::Tensor;

constexpr int64_t kIn = 64, kOut = 16;

using minitrain::bench::filled;
using minitrain::bench::optimizer_config;

void train_step(benchmark::State& state, const std::string& opt_name, int64_t width,
                int64_t batch) {
  minitrain::Generator gen(0);
  auto model = minitrain::make_mlp({kIn, width, width, kOut}, minitrain::Activation::ReLU, gen);
  model->set_needs_input_grad(false);  // as minitrain train does, and as torch skips a data input's grad
  auto opt = minitrain::make_optimizer(optimizer_config(opt_name), model->named_parameters());
  minitrain::MSELoss loss_fn;
  const Tensor x = filled(batch, kIn, 1), y = filled(batch, kOut, 2);
  double loss = 0;
  for (auto _ : state) {
    Tensor l = loss_fn.forward(model->forward(x), y);
    opt->zero_grad();
    model->backward(loss_fn.backward());
    opt->step();
    loss = l.item();  // the loss reaches the host every step, as a training loop logs it
    benchmark::DoNotOptimize(loss);
  }
  state.counters["samples/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = double(model->num_parameters());
  state.counters["loss"] = loss;  // finite and falling: the step did real work
}

}  // namespace

int main(int argc, char** argv) {
  // --threads=N: minitrain's CPU threads (default 2, the setting PyTorch gets in the comparison).
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("model", "mlp:64,W,W,16 relu, float32, MSE mean");

  for (const char* opt : {"sgd", "adam"})
    for (int64_t batch : {256, 64})
      for (int64_t w : {64, 128, 256, 512, 1024}) {
        const std::string name = std::string("train_step/") + opt + "/w" + std::to_string(w) +
                                 "/b" + std::to_string(batch);
        benchmark::RegisterBenchmark(name.c_str(),
                                     [opt, w, batch](benchmark::State& s) {
                                       train_step(s, opt, w, batch);
                                     })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
