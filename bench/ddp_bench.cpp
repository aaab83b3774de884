// DistributedDataParallel training step on the threads backend: 2 CPU ranks (one thread each,
// plus each DDP's communication thread), mlp:256,1024,1024,1024,16 (about 2.4 M parameters,
// 9.5 MiB of gradients), local batch 128, SGD with momentum. Step time with the bucket
// all-reduces overlapped with backward or all after it, for buckets of 1, 4 and 25 MiB (25 MiB:
// one bucket, nothing to overlap). `local` is one rank's step without DDP or a peer: the
// difference is what communication (and the two ranks sharing the cores) costs.
// On a 2-core machine the two ranks' GEMMs already use both cores, so overlap can only hide the
// all-reduce's memory traffic behind the other ranks' compute; on GPUs the same code overlaps
// NCCL on a side stream.
//
//   minitrain_ddp_bench [--threads=1] [--benchmark_filter=overlap]

#include <benchmark/benchmark.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"
#include "core/generator.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/comm/thread_communicator.h"

namespace {

using namespace minitrain;

const std::vector<int64_t> kSizes = {256, 1024, 1024, 1024, 16};
constexpr int64_t kLocalBatch = 128;

// One rank: its replica in a DDP, its optimizer and its rows.
struct Rank {
  Rank(Communicator& comm, DdpOptions options)
      : ddp(model(comm.rank()), comm, options),
        opt(make_optimizer(bench::optimizer_config("sgd"), ddp.named_parameters())),
        x(bench::filled(kLocalBatch, kSizes.front(), 1 + comm.rank())),
        y(bench::filled(kLocalBatch, kSizes.back(), 11 + comm.rank())) {}

  static std::unique_ptr<Module> model(int rank) {
    Generator gen(rank);
    auto m = make_mlp(kSizes, Activation::ReLU, gen);
    m->set_needs_input_grad(false);
    return m;
  }

  double step() {
    ddp.zero_grad();
    const double l = loss.forward(ddp.forward(x), y).item();
    ddp.backward(loss.backward());
    opt->step();
    return l;
  }

  DistributedDataParallel ddp;
  std::unique_ptr<Optimizer> opt;
  MSELoss loss;
  Tensor x, y;
};

// Rank 1 on its own thread: runs one step each time the benchmark's thread (rank 0) asks.
class PeerThread {
 public:
  explicit PeerThread(std::function<void()> step)
      : step_(std::move(step)), thread_([this] { loop(); }) {}
  ~PeerThread() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void start_step() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++wanted_;
    }
    cv_.notify_all();
  }
  void wait_step() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_ == wanted_; });
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return stop_ || done_ < wanted_; });
      if (done_ == wanted_) return;  // stop_
      lock.unlock();
      try {
        step_();
      } catch (...) {
        std::lock_guard<std::mutex> guard(mu_);
        error_ = std::current_exception();
      }
      lock.lock();
      ++done_;
      cv_.notify_all();
    }
  }

  std::function<void()> step_;
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t wanted_ = 0, done_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts after the members it uses
};

void ddp_step(benchmark::State& state, bool overlap, int64_t bucket_mib) {
  DdpOptions options;
  options.overlap = overlap;
  options.bucket_bytes = bucket_mib << 20;
  auto comms = make_thread_communicators({Device::cpu(), Device::cpu()});
  // Construction is collective: both ranks build their DDP at once.
  std::unique_ptr<Rank> r0, r1;
  std::thread build([&] { r1 = std::make_unique<Rank>(*comms[1], options); });
  r0 = std::make_unique<Rank>(*comms[0], options);
  build.join();
  PeerThread peer([&] { r1->step(); });
  double loss = 0;
  for (auto _ : state) {
    peer.start_step();
    loss = r0->step();
    peer.wait_step();
  }
  state.counters["samples/s"] =
      benchmark::Counter(double(2 * kLocalBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["buckets"] = static_cast<double>(r0->ddp.bucket_names().size());
  state.counters["loss"] = loss;  // finite: the step did real work
}

// One rank's step alone: the same model and rows, no DDP, no peer.
void local_step(benchmark::State& state) {
  auto m = Rank::model(0);
  auto opt = make_optimizer(bench::optimizer_config("sgd"), m->named_parameters());
  MSELoss loss_fn;
  const Tensor x = bench::filled(kLocalBatch, kSizes.front(), 1),
               y = bench::filled(kLocalBatch, kSizes.back(), 11);
  double loss = 0;
  for (auto _ : state) {
    m->zero_grad();
    loss = loss_fn.forward(m->forward(x), y).item();
    m->backward(loss_fn.backward());
    opt->step();
  }
  state.counters["samples/s"] =
      benchmark::Counter(double(kLocalBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["loss"] = loss;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench::take_threads_flag(argc, argv, 1);
  benchmark::AddCustomContext("threads per rank", std::to_string(threads));
  benchmark::AddCustomContext(
      "model", "mlp:256,1024,1024,1024,16 relu, local batch 128, SGD momentum, 2 CPU ranks");
  benchmark::RegisterBenchmark("ddp/local_one_rank", local_step)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  for (bool overlap : {true, false})
    for (int64_t mib : {1, 4, 25})
      benchmark::RegisterBenchmark(
          ("ddp/" + std::string(overlap ? "overlap" : "no_overlap") + "/bucket" +
           std::to_string(mib) + "MiB")
              .c_str(),
          [overlap, mib](benchmark::State& s) { ddp_step(s, overlap, mib); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
