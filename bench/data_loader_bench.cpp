// The DataLoader's worker threads on a data set that takes 5 ms to gather a batch (a disk read or
// a decode: time a worker spends waiting, so several overlap even on two cores). samples/s with
// 0 workers (batches prepared on the calling thread), 1, 2 and 4, and each as a ratio to 0 workers
// measured in the same run: `alone` takes batches as fast as the loader gives them (N workers
// approach N times the rate), `with_step` runs a training step of mlp:64,256,256,1 on each batch
// (one worker hides the gather behind the step; more help while the gather is longer than it).
// One compute thread by default: the step stays a few milliseconds even on a busy machine.
//
//   minitrain_data_loader_bench [--threads=1] [--benchmark_filter=alone]

#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"
#include "core/generator.h"
#include "data/data_loader.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"

namespace {

using namespace minitrain;

constexpr int64_t kRows = 256 * 64, kBatch = 256, kFeatures = 64;
constexpr auto kGatherTime = std::chrono::milliseconds(5);

// The rows of a synthetic regression, each batch 5 ms late: thread-safe (sleeps, then reads).
class SlowDataset final : public Dataset {
 public:
  SlowDataset() : rows_(make_synthetic_regression(kRows, kFeatures, 1, /*seed=*/7)) {}
  int64_t size() const override { return rows_.size(); }
  int64_t feature_dim() const override { return rows_.feature_dim(); }
  int64_t target_dim() const override { return rows_.target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    std::this_thread::sleep_for(kGatherTime);
    rows_.gather(indices, x, y);
  }

 private:
  TensorDataset rows_;
};

// One SGD step of mlp:64,256,256,1 on a batch: the consumer's work between batches.
struct Step {
  Step() : gen(3), model(make_mlp({kFeatures, 256, 256, 1}, Activation::ReLU, gen)) {
    model->set_needs_input_grad(false);
    opt = make_optimizer(bench::optimizer_config("sgd"), model->named_parameters());
  }
  double run(const Batch& b) {
    model->zero_grad();
    const double l = loss.forward(model->forward(b.x), b.y).item();
    model->backward(loss.backward());
    opt->step();
    return l;
  }
  Generator gen;
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> opt;
  MSELoss loss;
};

// samples/s of 0 workers, by variant, for the ratios of the runs after it.
std::map<std::string, double>& baseline() {
  static std::map<std::string, double> rates;
  return rates;
}

void load(benchmark::State& state, int workers, bool with_step) {
  DataLoaderOptions o;
  o.batch_size = kBatch;
  o.workers = workers;
  o.seed = 1;
  DataLoader loader(std::make_shared<SlowDataset>(), o);
  Step step;
  loader.next();  // the workers start with the first batch: not part of the steady state
  int64_t batches = 0;
  double loss = 0;
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    const Batch b = loader.next();
    if (with_step) loss = step.run(b);
    ++batches;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double rate = static_cast<double>(batches * kBatch) / seconds;
  state.counters["samples/s"] =
      benchmark::Counter(double(kBatch), benchmark::Counter::kIsIterationInvariantRate);
  const std::string variant = with_step ? "with_step" : "alone";
  if (workers == 0) baseline()[variant] = rate;
  const auto base = baseline().find(variant);
  if (base != baseline().end()) state.counters["x_0_workers"] = rate / base->second;
  if (with_step) state.counters["loss"] = loss;  // finite: the step did real work
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench::take_threads_flag(argc, argv, 1);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("data", "16384 rows x 64 features, batch 256, 5 ms sleep per gather");
  for (bool with_step : {false, true})
    for (int workers : {0, 1, 2, 4})  // 0 first: the others' ratios are to it
      benchmark::RegisterBenchmark(
          ("data_loader/" + std::string(with_step ? "with_step" : "alone") +
           "/workers:" + std::to_string(workers))
              .c_str(),
          [workers, with_step](benchmark::State& s) { load(s, workers, with_step); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  return minitrain::bench::run_benchmarks(argc, argv);
}
