// DistributedDataParallel training step on the threads backend: 2 CPU ranks (one thread each,
// plus each DDP's communication thread), mlp:256,1024,1024,1024,16 (about 2.4 M parameters,
// 9.5 MiB of gradients), local batch 128, SGD with momentum, against one rank alone on the same
// model and rows (`local`: no DDP, no peer).
//
// ddp/compare/bucketN: the ratios of issue 16, from one run. Each iteration times, one after the
// other, a step of one rank alone, the steps of two ranks computing at once without DDP, a 2-rank
// DDP step with every bucket all-reduced after backward (no overlap) and one with the buckets
// all-reduced during backward (overlap), so that load on the machine falls on all four alike; the
// medians over the iterations give
//   overlap_vs_no_overlap = no-overlap step / overlap step      (>= 1: overlap is no slower)
//   two_ranks_vs_one      = 2-rank samples/s / one rank's        (2 x one-rank step / overlap step)
// and the step times in ms, with ceiling_two_vs_one = 2 x one-rank step / the step of two ranks
// computing at once with no DDP and no communication at all (TwoIndependent): what the machine
// allows any 2-rank scheme. Buckets of 1, 4 and 25 MiB (25 MiB: one bucket, nothing to
// overlap). On 2 cores the two ranks' GEMMs already fill both cores, so the all-reduce's work (its
// memory traffic) competes with compute whether it overlaps or not, and 2 ranks can gain at most
// what that traffic leaves; on GPUs the same code overlaps NCCL on a side stream.
// ddp/overlap/bucketN and ddp/no_overlap/bucketN time one configuration alone (samples/s).
//
//   minitrain_ddp_bench [--threads=1] [--benchmark_filter=compare]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_threads.h"
#include "bench/ddp_rank.h"
#include "core/generator.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/comm/thread_communicator.h"

namespace {

using namespace minitrain;

using bench::DdpRank;
using Rank = DdpRank;
const std::vector<int64_t>& kSizes = bench::kDdpSizes;
constexpr int64_t kLocalBatch = bench::kDdpLocalBatch;

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

// Two ranks of one configuration: rank 0 steps on the caller's thread, rank 1 on its own.
class TwoRanks {
 public:
  TwoRanks(bool overlap, int64_t bucket_mib) {
    DdpOptions options;
    options.overlap = overlap;
    options.bucket_bytes = bucket_mib << 20;
    comms_ = make_thread_communicators({Device::cpu(), Device::cpu()});
    // Construction is collective: both ranks build their DDP at once.
    std::thread build([&] { r1_ = std::make_unique<Rank>(*comms_[1], options); });
    r0_ = std::make_unique<Rank>(*comms_[0], options);
    build.join();
    peer_ = std::make_unique<PeerThread>([this] { r1_->step(); });
  }
  double step() {
    peer_->start_step();
    const double loss = r0_->step();
    peer_->wait_step();
    return loss;
  }
  std::size_t buckets() const { return r0_->ddp.bucket_names().size(); }

 private:
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<Rank> r0_, r1_;
  std::unique_ptr<PeerThread> peer_;  // last: stopped before the ranks go
};

// One rank's step alone: the same model and rows, no DDP, no peer.
class OneRank {
 public:
  OneRank()
      : model_(Rank::model(0)),
        opt_(make_optimizer(bench::optimizer_config("sgd"), model_->named_parameters())),
        x_(bench::filled(kLocalBatch, kSizes.front(), 1)),
        y_(bench::filled(kLocalBatch, kSizes.back(), 11)) {}
  double step() {
    model_->zero_grad();
    const double l = loss_.forward(model_->forward(x_), y_).item();
    model_->backward(loss_.backward());
    opt_->step();
    return l;
  }

 private:
  std::unique_ptr<Module> model_;
  std::unique_ptr<Optimizer> opt_;
  MSELoss loss_;
  Tensor x_, y_;
};

// Two ranks' steps at once with no DDP and no communication at all: what the two cores give two
// ranks' compute (they share the memory bandwidth and the last-level cache), the ceiling of any
// 2-rank DDP step on this machine.
class TwoIndependent {
 public:
  TwoIndependent() : peer_([this] { b_.step(); }) {}
  void step() {
    peer_.start_step();
    a_.step();
    peer_.wait_step();
  }

 private:
  OneRank a_, b_;
  PeerThread peer_;  // last: stopped before the ranks go
};

double seconds_of(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void ddp_step(benchmark::State& state, bool overlap, int64_t bucket_mib) {
  TwoRanks ranks(overlap, bucket_mib);
  double loss = 0;
  for (auto _ : state) loss = ranks.step();
  state.counters["samples/s"] =
      benchmark::Counter(double(2 * kLocalBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["buckets"] = static_cast<double>(ranks.buckets());
  state.counters["loss"] = loss;  // finite: the step did real work
}

void local_step(benchmark::State& state) {
  OneRank rank;
  double loss = 0;
  for (auto _ : state) loss = rank.step();
  state.counters["samples/s"] =
      benchmark::Counter(double(kLocalBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["loss"] = loss;
}

// The three configurations in turn each iteration; the iteration's time (manual) is the overlap
// step's, so samples/s is the 2-rank figure.
void compare_step(benchmark::State& state, int64_t bucket_mib) {
  OneRank one;
  TwoIndependent independent;
  TwoRanks no_overlap(false, bucket_mib), overlap(true, bucket_mib);
  for (int i = 0; i < 2; ++i) {  // warm-up: first touch of every buffer
    one.step();
    independent.step();
    no_overlap.step();
    overlap.step();
  }
  std::vector<double> t_one, t_independent, t_no, t_over;
  double loss = 0;
  for (auto _ : state) {
    t_one.push_back(seconds_of([&] { one.step(); }));
    t_independent.push_back(seconds_of([&] { independent.step(); }));
    t_no.push_back(seconds_of([&] { no_overlap.step(); }));
    t_over.push_back(seconds_of([&] { loss = overlap.step(); }));
    state.SetIterationTime(t_over.back());
  }
  const double one_s = median(t_one), independent_s = median(t_independent);
  const double no_s = median(t_no), over_s = median(t_over);
  state.counters["one_rank_ms"] = one_s * 1e3;
  state.counters["two_independent_ms"] = independent_s * 1e3;
  state.counters["no_overlap_ms"] = no_s * 1e3;
  state.counters["overlap_ms"] = over_s * 1e3;
  state.counters["overlap_vs_no_overlap"] = no_s / over_s;
  state.counters["two_ranks_vs_one"] = 2.0 * one_s / over_s;
  state.counters["two_ranks_vs_one_no_overlap"] = 2.0 * one_s / no_s;
  // The most 2 ranks could gain here: both ranks' steps with no communication at all.
  state.counters["ceiling_two_vs_one"] = 2.0 * one_s / independent_s;
  state.counters["samples/s"] =
      benchmark::Counter(double(2 * kLocalBatch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["buckets"] = static_cast<double>(overlap.buckets());
  state.counters["loss"] = loss;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = bench::take_threads_flag(argc, argv, 1);
  benchmark::AddCustomContext("threads per rank", std::to_string(threads));
  benchmark::AddCustomContext(
      "model", "mlp:256,1024,1024,1024,16 relu, local batch 128, SGD momentum, 2 CPU ranks");
  for (int64_t mib : {1, 4, 25})
    benchmark::RegisterBenchmark(("ddp/compare/bucket" + std::to_string(mib) + "MiB").c_str(),
                                 [mib](benchmark::State& s) { compare_step(s, mib); })
        ->UseManualTime()
        ->MinTime(3.0)
        ->Unit(benchmark::kMillisecond);
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
  return minitrain::bench::run_benchmarks(argc, argv);
}
