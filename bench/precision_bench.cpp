// One training step per precision: mlp:64,W,W,16 (relu), batch 256 and 2048, Adam, on one fixed
// batch, as minitrain train runs it with --precision fp32 | bf16 | fp16: forward (16-bit GEMMs with
// float32 master weights under bf16/fp16), the loss in float32 on the widened prediction, backward,
// and for fp16 the loss scale and the fused unscale + inf check before the step. Counters:
//   samples/s       steps x batch / wall time (the loss is read on the host every step)
//   peak_bytes      the device allocator's peak during the timed steps (weights, gradients,
//                   Adam's moments, cached activations and the step's temporaries)
//   saved_bytes     what forward keeps for backward (the layers' cached inputs): 16-bit under
//                   bf16/fp16, half of float32's
// Compare the precisions of one W with each other (same run, same machine). On the CPU the 16-bit
// GEMMs run as float32 GEMMs on widened operands (exact), so bf16/fp16 cost the casts and save
// activation memory, not time; on a GPU with tensor cores (--gemm tc_bf16) the GEMMs themselves
// take the 16-bit path.
//
//   minitrain_precision_bench --threads=2 [--device=cpu|cuda] [--benchmark_filter=w1024]

#include <benchmark/benchmark.h>

#include "bench/bench_main.h"
#include "bench/bench_device.h"
#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"

#include <memory>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/stream.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/grad_scaler.h"
#include "optim/make_optimizer.h"

namespace {

using minitrain::DType;
using minitrain::Tensor;

constexpr int64_t kIn = 64, kOut = 16;

void precision_step(benchmark::State& state, minitrain::Device device, DType precision,
                    int64_t width, int64_t batch) {
  minitrain::Generator gen(0);
  auto model =
      minitrain::make_mlp({kIn, width, width, kOut}, minitrain::Activation::ReLU, gen, device);
  model->set_needs_input_grad(false);
  model->set_precision(precision);
  auto opt = minitrain::make_optimizer(minitrain::bench::optimizer_config("adam"),
                                       model->named_parameters());
  std::unique_ptr<minitrain::GradScaler> scaler;
  if (precision == DType::Float16) scaler = std::make_unique<minitrain::GradScaler>();
  minitrain::MSELoss loss_fn;
  const Tensor x = minitrain::bench::filled(batch, kIn, 1).to(device),
               y = minitrain::bench::filled(batch, kOut, 2).to(device);
  int64_t skipped = 0;
  auto step = [&] {
    opt->zero_grad();
    const Tensor out = model->forward(x);
    const bool half = minitrain::is_half(out.dtype());
    Tensor l = loss_fn.forward(half ? minitrain::cast(out, DType::Float32) : out, y);
    Tensor grad = loss_fn.backward();
    if (scaler) minitrain::scale(grad, grad, scaler->scale());
    model->backward(half ? minitrain::cast(grad, out.dtype()) : grad);
    bool finite = true;
    if (scaler) {
      finite = scaler->unscale(model->named_parameters());
      scaler->update(!finite);
      skipped += !finite;
    }
    if (finite) opt->step();
    return l.item();
  };
  double loss = step();  // optimizer state, allocator blocks and handles before timing
  minitrain::allocator_for(device).reset_peak();
  for (auto _ : state) {
    loss = step();
    benchmark::DoNotOptimize(loss);
  }
  state.counters["samples/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_bytes"] = double(minitrain::memory_stats(device).peak);
  // Cached for backward: the inputs of both ReLUs and of Linear 2 and 3, [batch, W] each, at the
  // precision's element size (Linear 1's input is the data, not an activation).
  state.counters["saved_bytes"] =
      double(batch * 4 * width) * double(minitrain::dtype_size(precision));
  state.counters["loss"] = loss;
  state.counters["skipped"] = double(skipped);
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("model", "mlp:64,W,W,16 relu, batch B, adam, MSE mean");
  const minitrain::Device device = minitrain::bench::take_device_flag(argc, argv);
  for (const DType p : {DType::Float32, DType::BFloat16, DType::Float16})
    for (int64_t w : {256, 1024})
      for (int64_t batch : {256, 2048}) {
        const std::string name = std::string("precision_step/") +
                                 (device.is_cuda() ? "cuda/" : "") + minitrain::precision_name(p) +
                                 "/w" + std::to_string(w) + "/b" + std::to_string(batch);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [device, p, w, batch](benchmark::State& s) { precision_step(s, device, p, w, batch); })
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
  return minitrain::bench::run_benchmarks(argc, argv);
}
