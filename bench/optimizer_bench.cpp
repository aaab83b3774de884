// Optimizer steps: one multi-tensor call over a model's parameter list
// (kernels/optim/multi_tensor_optim.h: one launch per up to 30-64 tensors on a GPU, one fork/join
// on the CPU) against one fused call per tensor (kernels/optim/sgd_step.h,
// kernels/optim/adam_step.h), in parameters updated per second. Two lists: an MLP of 8 layers of
// width 1024 (8 weights [1024, 1024] and 8 biases [1024]: 8.4M parameters in 16 tensors, mostly
// bandwidth) and 100 small tensors (50 [256, 256] and 50 [256]: 3.3M parameters, where a GPU pays
// one launch latency per tensor). SGD with momentum 0.9, Adam and AdamW with torch's defaults;
// float32. GPU times by CUDA events with L2 flushed (kernels/op_bench/device_timer.h).
//
//   minitrain_optimizer_bench [--device=cpu|cuda] [--threads=N]

#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_device.h"
#include "bench/bench_threads.h"
#include "kernels/op_bench/device_timer.h"
#include "core/device.h"
#include "core/tensor.h"
#include "kernels/fill.h"
#include "kernels/optim/adam_step.h"
#include "kernels/optim/multi_tensor_optim.h"
#include "kernels/optim/sgd_step.h"

namespace {

using minitrain::Device;
using minitrain::DType;
using minitrain::Shape;
using minitrain::Tensor;

std::vector<Shape> shapes_of(const std::string& model) {
  std::vector<Shape> s;
  if (model == "mlp8x1024") {
    for (int l = 0; l < 8; ++l) {
      s.push_back(Shape{1024, 1024});
      s.push_back(Shape{1024});
    }
  } else {  // "100_tensors"
    for (int l = 0; l < 50; ++l) {
      s.push_back(Shape{256, 256});
      s.push_back(Shape{256});
    }
  }
  return s;
}

std::vector<Tensor> make(const std::vector<Shape>& shapes, double value, Device d) {
  std::vector<Tensor> out;
  for (const Shape& s : shapes) {
    out.push_back(Tensor::empty(s, DType::Float32, d));
    minitrain::fill(out.back(), value);
  }
  return out;
}

void optimizer_step(benchmark::State& state, Device d, const std::string& model,
                    const std::string& opt, bool multi) {
  using namespace minitrain;
  const std::vector<Shape> shapes = shapes_of(model);
  std::vector<Tensor> p = make(shapes, 0.5, d), g = make(shapes, 1e-3, d);
  std::vector<Tensor> s1 = make(shapes, 0.0, d), s2 = make(shapes, 0.0, d), none;
  int64_t params = 0;
  for (const Tensor& t : p) params += t.numel();

  SGDStepArgs sgd;
  sgd.lr = 0.01;
  sgd.momentum = 0.9;
  const AdamStepArgs adam =
      adam_step_args(1e-3, 0.9, 0.999, 1e-8, opt == "adamw" ? 0.01 : 0.0,
                     /*decoupled=*/opt == "adamw", /*amsgrad=*/false, /*t=*/10);
  auto work = [&] {
    if (opt == "sgd") {
      if (multi)
        sgd_step_multi(p, g, s1, sgd);
      else
        for (std::size_t k = 0; k < p.size(); ++k) sgd_step(p[k], g[k], s1[k], sgd);
    } else {
      if (multi) {
        adam_step_multi(p, g, s1, s2, none, adam);
      } else {
        Tensor unused;
        for (std::size_t k = 0; k < p.size(); ++k)
          adam_step(p[k], g[k], s1[k], s2[k], unused, adam);
      }
    }
  };
  bench::DeviceTimer timer(d);
  for (auto _ : state) state.SetIterationTime(timer.time_seconds(work));
  state.counters["params/s"] =
      benchmark::Counter(double(params), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["tensors"] = double(p.size());
  state.counters["params"] = double(params);
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = minitrain::bench::take_device_flag(argc, argv);
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  minitrain::bench::add_device_context(device, threads);

  for (const char* model : {"mlp8x1024", "100_tensors"})
    for (const char* opt : {"sgd", "adam", "adamw"})
      for (bool multi : {false, true}) {
        const std::string name = std::string("optimizer/") + opt + "/" + model + "/" +
                                 (multi ? "multi_tensor" : "per_tensor");
        benchmark::RegisterBenchmark(
            name.c_str(),
            [=](benchmark::State& s) { optimizer_step(s, device, model, opt, multi); })
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
      }

  return minitrain::bench::run_benchmarks(argc, argv);
}
