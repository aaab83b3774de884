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
// The large-layer step against its own GEMMs (issue 16: "at 90% or more of the OpenBLAS GEMM rate
// measured in the same run"): step_gemm/OPT/mlp256_1024_1024_1/b256 times the step of
// bench/large_step.h and, alternately with every step, the same GEMMs alone: minitrain's CPU GEMM
// on the step's shapes, transposes and betas, in the step's order (step_gemms), on operands of
// their own. Alternating puts both under the same machine conditions. Counters: gemm_GFLOP/s, the
// step's GEMM flops (2mnk each: forward x W^T, backward dW = dy^T x and, past the first layer,
// dx = dy W) per second of step; ref_GFLOP/s, the same flops per second of the GEMMs alone;
// pct_of_gemm = 100 x gemm_GFLOP/s / ref_GFLOP/s, the share of the step that is GEMM at OpenBLAS's
// speed (100: a step that does nothing but its GEMMs). step_gemm/gemm/SHAPE/openblas_threads
// and .../minitrain time each of those shapes alone on one cblas_sgemm with OpenBLAS's own thread
// pool and on minitrain's CPU GEMM (OpenBLAS single-threaded per tile, the tiles on minitrain's
// threads, as the step calls it), pct_of_ref the second as a percentage of the first: the
// reference of pct_of_gemm is OpenBLAS's own speed on these shapes.
//
//   minitrain_train_step_bench --threads=2 [--benchmark_filter=adam] [--benchmark_repetitions=5]
//   minitrain_train_step_bench --benchmark_filter=step_gemm

#include <benchmark/benchmark.h>
#include <cblas.h>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"
#include "bench/cpu_peak.h"
#include "bench/large_step.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/generator.h"
#include "core/parallel_for.h"
#include "core/tensor.h"
#include "core/thread_policy.h"
#include "kernels/gemm/gemm.h"
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
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    loss = step();
    benchmark::DoNotOptimize(loss);
  }
  const std::chrono::duration<double> wall = std::chrono::steady_clock::now() - start;
  state.counters["samples/s"] =
      benchmark::Counter(double(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["params"] = double(model->num_parameters());
  state.counters["loss"] = loss;  // finite and falling: the step did real work
  if (!device.is_cuda()) {        // the step's GEMM flops against the CPU's peak (Note [peak FP32])
    double gflop = 0;
    for (const auto& g : minitrain::bench::step_gemms({kIn, width, width, kOut}, batch))
      gflop += g.flops() * 1e-9;
    state.counters["pct_of_peak"] = minitrain::bench::pct_of_peak(
        gflop * double(state.iterations()) / wall.count(), minitrain::num_threads());
  }
}

// ---- the large-layer step against its own GEMMs ----

using minitrain::bench::StepGemm;
using minitrain::bench::StepGemmOperands;
using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// minitrain's CPU GEMM, as Linear calls it (gemm_with "auto" on the CPU ends here).
void minitrain_gemm(const StepGemm& g, StepGemmOperands& o) {
  minitrain::gemm_cpu<float>(o.c.data<float>(), o.a.data<float>(), g.trans_a, o.b.data<float>(),
                             g.trans_b, g.m, g.n, g.k, 1.f, g.beta);
}

// One cblas_sgemm on OpenBLAS's own pool of g_threads (minitrain keeps OpenBLAS single-threaded:
// Note [OpenBLAS on OpenMP threads] in kernels/gemm/gemm.cpp; the case lends it the pool).
int g_threads = 2;
void openblas_threads_gemm(const StepGemm& g, StepGemmOperands& o) {
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, int(g.m), int(g.n), int(g.k), 1.f,
              o.a.data<float>(), int(g.trans_a ? g.m : g.k), o.b.data<float>(),
              int(g.trans_b ? g.k : g.n), g.beta, o.c.data<float>(), int(g.n));
}

// Seconds per call of each shape on OpenBLAS's own threads, from this run.
std::map<std::string, double>& openblas_threads_seconds() {
  static std::map<std::string, double> table;
  return table;
}
// Seconds per call of each shape on minitrain's CPU GEMM in its own loop, from this run.
std::map<std::string, double>& minitrain_loop_seconds() {
  static std::map<std::string, double> table;
  return table;
}

// Mean seconds per call over the benchmark's loop, or (state == nullptr) over >= 10 calls and
// 0.2 s: the reference timed inline when a filter left its case out.
template <typename Call>
double time_calls(benchmark::State* state, Call&& call) {
  call();  // warm-up: OpenBLAS's buffers, the thread pools
  const auto t0 = Clock::now();
  int64_t calls = 0;
  double seconds = 0;
  if (state != nullptr) {
    for (auto _ : *state) call();
    calls = int64_t(state->iterations());
    seconds = seconds_between(t0, Clock::now());
  } else {
    for (; calls < 10 || seconds < 0.2; ++calls) {
      call();
      seconds = seconds_between(t0, Clock::now());
    }
  }
  return seconds / double(calls);
}

double time_openblas_threads(benchmark::State* state, const StepGemm& g) {
  StepGemmOperands o(g);
  openblas_set_num_threads(g_threads);
  const double s = time_calls(state, [&] {
    openblas_threads_gemm(g, o);
    benchmark::DoNotOptimize(o.c.raw_data());
    benchmark::ClobberMemory();
  });
  openblas_set_num_threads(1);  // back to minitrain's setting
  // Its workers spin (sched_yield) for about 0.1 s before they sleep: let them, untimed, so that
  // they do not take the next case's cores.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  return s;
}

void step_gemm_shape(benchmark::State& state, const StepGemm& g, bool openblas_threads) {
  double& ref = openblas_threads_seconds()[g.name];
  double seconds = 0;
  if (openblas_threads) {
    seconds = ref = time_openblas_threads(&state, g);
  } else {
    StepGemmOperands o(g);
    seconds = time_calls(&state, [&] {
      minitrain_gemm(g, o);
      benchmark::DoNotOptimize(o.c.raw_data());
      benchmark::ClobberMemory();
    });
    if (ref == 0) ref = time_openblas_threads(nullptr, g);  // the reference was filtered out
    minitrain_loop_seconds()[g.name] = seconds;
    state.counters["pct_of_ref"] = 100.0 * ref / seconds;
    state.SetLabel("ref openblas_threads");
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(g.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// Each iteration: one training step (the iteration's time), then the step's GEMMs alone.
void step_gemm(benchmark::State& state, const std::string& opt_name) {
  minitrain::bench::LargeStep step(opt_name);
  const std::vector<StepGemm> gemms = minitrain::bench::step_gemms(
      minitrain::bench::kLargeStepWidths, minitrain::bench::kLargeStepBatch);
  std::vector<StepGemmOperands> operands(gemms.begin(), gemms.end());
  auto gemms_alone = [&] {
    for (size_t i = 0; i < gemms.size(); ++i) minitrain_gemm(gemms[i], operands[i]);
  };
  double loss = step.run();  // untimed: the optimizer's state, the first allocations
  gemms_alone();
  double step_seconds = 0, gemm_seconds = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    loss = step.run();
    const auto t1 = Clock::now();
    gemms_alone();
    const auto t2 = Clock::now();
    state.SetIterationTime(seconds_between(t0, t1));
    step_seconds += seconds_between(t0, t1);
    gemm_seconds += seconds_between(t1, t2);
  }
  double flops = 0;
  for (const StepGemm& g : gemms) flops += g.flops();
  const double steps = double(state.iterations());
  state.counters["gemm_GFLOP/s"] = flops * 1e-9 * steps / step_seconds;
  state.counters["ref_GFLOP/s"] = flops * 1e-9 * steps / gemm_seconds;
  state.counters["pct_of_gemm"] = 100.0 * gemm_seconds / step_seconds;
  // The step's GEMM flops per second against the hardware (Note [peak FP32]).
  state.counters["pct_of_peak"] =
      minitrain::bench::pct_of_peak(flops * 1e-9 * steps / step_seconds, g_threads);
  // Against each shape in a loop of its own (the per-shape cases, when they ran): operands stay
  // in cache from call to call there, which they cannot in a step whose data outgrow the caches.
  double loop_seconds = 0;
  for (const StepGemm& g : gemms) {
    const auto mt = minitrain_loop_seconds().find(g.name);
    const auto ob = openblas_threads_seconds().find(g.name);
    if (mt == minitrain_loop_seconds().end() || ob == openblas_threads_seconds().end()) {
      loop_seconds = 0;
      break;
    }
    loop_seconds += std::min(mt->second, ob->second);
  }
  if (loop_seconds > 0)
    state.counters["pct_of_gemm_loop"] = 100.0 * loop_seconds * steps / step_seconds;
  state.counters["samples/s"] = double(minitrain::bench::kLargeStepBatch) * steps / step_seconds;
  state.counters["loss"] = loss;
}

}  // namespace

int main(int argc, char** argv) {
  // --threads=N: minitrain's CPU threads (default 2, the setting PyTorch gets in the comparison).
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  g_threads = threads;
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("omp_wait_policy", minitrain::thread_wait_policy());
  minitrain::bench::add_cpu_context(threads);
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

  // The large-layer step: each of its GEMM shapes alone (OpenBLAS's own threads first, the
  // reference), then the step per optimizer, alternating with its GEMMs alone.
  const std::vector<StepGemm> large_gemms = minitrain::bench::step_gemms(
      minitrain::bench::kLargeStepWidths, minitrain::bench::kLargeStepBatch);
  for (const StepGemm& g : large_gemms)
    for (const bool openblas_threads : {true, false})
      benchmark::RegisterBenchmark(
          ("step_gemm/gemm/" + g.name + (openblas_threads ? "/openblas_threads" : "/minitrain"))
              .c_str(),
          [g, openblas_threads](benchmark::State& s) { step_gemm_shape(s, g, openblas_threads); })
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  for (const char* opt : {"adam", "sgd"})
    benchmark::RegisterBenchmark(
        (std::string("step_gemm/") + opt + "/mlp256_1024_1024_1/b256").c_str(),
        [opt](benchmark::State& s) { step_gemm(s, opt); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);

  return minitrain::bench::run_benchmarks(argc, argv);
}
