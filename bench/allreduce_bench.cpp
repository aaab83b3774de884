// All-reduce on the threads backend: minitrain's ring over send/recv against the backend's native
// shared-memory reduction, float32 sum, 4 KiB to 64 MiB, 2 and 4 CPU ranks. Reports nccl-tests'
// figures: algbw = bytes / time and busbw = algbw * 2(n-1)/n (the bandwidth each rank's links
// would need for the ring; comparable across rank counts), both in GB/s (1e9 bytes).
// On the CPU both are bound by memory bandwidth: native reads n tensors per rank (n^2 per op),
// the ring moves 2(n-1)/n per rank but copies each message twice (send deposits a copy).
//
//   minitrain_allreduce_bench [--threads=1] [--max-bytes=1GiB] [--benchmark_filter=ring/4]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_threads.h"
#include "core/bytes.h"
#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/thread_communicator.h"

namespace {

using namespace minitrain;

/// One measured batch: every rank runs a warm-up, meets at a barrier, then `ops` all-reduces;
/// rank 0 times the batch. Returns seconds per all-reduce.
double time_all_reduce(AllReduceAlgorithm algorithm, int ranks, int64_t bytes, int ops) {
  CommOptions options;
  options.all_reduce = algorithm;
  auto comms = make_thread_communicators(std::vector<Device>(ranks, Device::cpu()), options);
  const int64_t n = bytes / static_cast<int64_t>(sizeof(float));
  double seconds = 0;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Communicator& comm = *comms[r];
      Tensor t = Tensor::zeros({n});
      comm.all_reduce(t, ReduceOp::Sum);  // warm-up: first touch of pages, the ring's scratch
      comm.barrier();
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < ops; ++i) comm.all_reduce(t, ReduceOp::Sum);
      comm.barrier();
      if (r == 0)
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    });
  for (auto& t : threads) t.join();
  return seconds / ops;
}

void all_reduce_bench(benchmark::State& state, AllReduceAlgorithm algorithm) {
  const int ranks = static_cast<int>(state.range(0));
  const int64_t bytes = state.range(1);
  const int ops = static_cast<int>(std::clamp<int64_t>((64 << 20) / bytes, 2, 50));
  double per_op = 0;
  for (auto _ : state) {
    per_op = time_all_reduce(algorithm, ranks, bytes, ops);
    state.SetIterationTime(per_op);
  }
  const double algbw = static_cast<double>(bytes) / per_op / 1e9;
  state.counters["algbw_GBps"] = algbw;
  state.counters["busbw_GBps"] = algbw * 2.0 * (ranks - 1) / ranks;
  state.counters["bytes"] = static_cast<double>(bytes);
}

// 4 KiB, 64 KiB, 1 MiB, 16 MiB, then x4 up to max_bytes (64 MiB by default; 1 GiB with 4 ranks
// needs about 12 GiB of memory: each rank's tensor and its scratch).
void register_sizes(const char* name, AllReduceAlgorithm algorithm, int64_t max_bytes) {
  auto* b = benchmark::RegisterBenchmark(
      name, [algorithm](benchmark::State& s) { all_reduce_bench(s, algorithm); });
  for (int ranks : {2, 4}) {
    int64_t bytes = 4 << 10;
    for (; bytes <= std::min<int64_t>(max_bytes, 16 << 20); bytes *= 16) b->Args({ranks, bytes});
    for (bytes = int64_t(64) << 20; bytes <= max_bytes; bytes *= 4) b->Args({ranks, bytes});
  }
  b->ArgNames({"ranks", "bytes"})->Iterations(1)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace

int main(int argc, char** argv) {
  // The ranks are the threads: minitrain's own loops stay single-threaded unless asked.
  minitrain::bench::take_threads_flag(argc, argv, 1);
  int64_t max_bytes = int64_t(64) << 20;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--max-bytes=", 12) == 0)
      max_bytes = static_cast<int64_t>(minitrain::parse_bytes(argv[i] + 12));
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  register_sizes("all_reduce_bench/native", AllReduceAlgorithm::Native, max_bytes);
  register_sizes("all_reduce_bench/ring", AllReduceAlgorithm::Ring, max_bytes);
  return minitrain::bench::run_benchmarks(argc, argv);
}
