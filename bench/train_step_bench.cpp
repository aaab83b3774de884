// One training step of an MLP, end to end: forward (three Linear layers, two ReLUs), MSE loss
// (mean), zero_grad, backward, optimizer step, on one fixed batch held in memory (the loader is
// not timed). Models mlp:64,W,W,16 for W in 64..1024, batch 256 and 64, float32. Small widths are
// bound by per-op overhead and the elementwise passes (on a GPU: by kernel launches), large ones
// by the six GEMMs.
//
// CPU cases are train_step/OPT/wW/bB; on a machine with a usable GPU the same cases also run on
// cuda:0 as train_step/cuda/OPT/wW/bB (registered at run time, absent otherwise). Both are timed
// by the wall clock around whole steps, and every step ends by reading the loss on the host: on
// the GPU that copy synchronizes the device, so a step's time includes all of its kernels (as a
// training loop that logs its loss sees it), not just their launches.
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

#include "core/device.h"
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

void train_step(benchmark::State& state, minitrain::Device device, const std::string& opt_name,
                int64_t width, int64_t batch) {
  minitrain::Generator gen(0);
  auto model =
      minitrain::make_mlp({kIn, width, width, kOut}, minitrain::Activation::ReLU, gen, device);
  model->set_needs_input_grad(
      false);  // as minitrain train does, and as torch skips a data input's grad
  auto opt = minitrain::make_optimizer(optimizer_config(opt_name), model->named_parameters());
  minitrain::MSELoss loss_fn;
  const Tensor x = filled(batch, kIn, 1).to(device), y = filled(batch, kOut, 2).to(device);
  auto step = [&] {
    Tensor l = loss_fn.forward(model->forward(x), y);
    opt->zero_grad();
    model->backward(loss_fn.backward());
    opt->step();
    return l.item();  // the loss reaches the host every step, as a training loop logs it
  };
  // One untimed step first: it creates the optimizer state and, on a GPU, the cuBLAS handle and
  // the allocator's blocks, which would otherwise land in a --quick run's only timed batch.
  double loss = step();
  for (auto _ : state) {
    loss = step();
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

  std::vector<minitrain::Device> devices = {minitrain::Device::cpu()};
  if (minitrain::cuda_device_count() > 0) {
    devices.push_back(minitrain::Device::cuda(0));
    const minitrain::CudaDeviceInfo gpu = minitrain::cuda_devices().front();
    benchmark::AddCustomContext("gpu", "cuda:0 " + gpu.name);
  } else {
    benchmark::AddCustomContext("gpu", "none (" + minitrain::cuda_unavailable_reason() + ")");
  }

  for (const minitrain::Device device : devices)
    for (const char* opt : {"sgd", "adam"})
      for (int64_t batch : {256, 64})
        for (int64_t w : {64, 128, 256, 512, 1024}) {
          // The CPU names stay as bench/compare_train_step.sh selects them: train_step/OPT/wW/bB.
          const std::string name = std::string("train_step/") + (device.is_cuda() ? "cuda/" : "") +
                                   opt + "/w" + std::to_string(w) + "/b" + std::to_string(batch);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [device, opt, w, batch](benchmark::State& s) {
                                         train_step(s, device, opt, w, batch);
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
