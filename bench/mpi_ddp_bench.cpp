// DistributedDataParallel on the MPI backend, run under mpirun: each rank a process with one CPU
// thread (as `minitrain train --threads 1` under mpirun), mlp:256,1024,1024,1024,16 (about 2.4 M
// parameters, 9.5 MiB of gradients), local batch 128, SGD with momentum; the model and rows of
// bench/ddp_bench.cpp, whose ranks are threads of one process.
//
// For buckets of 1, 4 and 25 MiB it times a step with every bucket all-reduced after backward
// (no overlap, `--no-overlap`) and one with the buckets all-reduced during backward (overlap, the
// default), and prints their medians and
//   overlap_vs_no_overlap = no-overlap step / overlap step      (>= 1: overlap is no slower)
// Not a Google Benchmark program: every rank must run the same number of steps. Each round times
// `--steps` steps of each configuration in turn between barriers, the slowest rank's time
// counting, so that load on the machine falls on both alike; the median round gives the figure.
//
//   mpirun -n 2 build/cpu/bench/minitrain_mpi_ddp_bench [--rounds=7] [--steps=5] [--threads=1]

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/ddp_rank.h"
#include "bench/mpi_rounds.h"
#include "core/parallel_for.h"
#include "parallel/comm/mpi_communicator.h"

using namespace minitrain;

int main(int argc, char** argv) {
  int rounds = 7, steps = 5, threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--rounds=", 9) == 0)
      rounds = std::max(1, std::atoi(argv[i] + 9));
    else if (std::strncmp(argv[i], "--steps=", 8) == 0)
      steps = std::max(1, std::atoi(argv[i] + 8));
    else if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::max(1, std::atoi(argv[i] + 10));
    else {
      std::fprintf(stderr,
                   "mpi_ddp_bench: unknown argument '%s' (--rounds=, --steps=, --threads=)\n",
                   argv[i]);
      return 2;
    }
  }
  try {
    set_num_threads(threads);
    auto comm = MpiCommunicator::world(CommOptions{});
    const int n = comm->size();
    if (comm->rank() == 0) {
      std::printf(
          "DDP step, MPI backend, %d ranks x %d thread(s), mlp:256,1024,1024,1024,16, local batch "
          "%lld, SGD momentum; median of %d rounds of %d steps; load average %s\n\n",
          n, threads, static_cast<long long>(bench::kDdpLocalBatch), rounds, steps,
          bench::load_average().c_str());
      std::printf("| bucket | no overlap ms | overlap ms | overlap_vs_no_overlap |\n");
      std::printf("|---|---|---|---|\n");
    }
    double worst = 1e9;
    for (int64_t mib : {1, 4, 25}) {
      DdpOptions options;
      options.bucket_bytes = mib << 20;
      options.overlap = false;
      bench::DdpRank after(*comm, options);
      options.overlap = true;
      bench::DdpRank during(*comm, options);
      bench::slowest_seconds_per_call([&] { after.step(); }, 2);  // first touch of every buffer
      bench::slowest_seconds_per_call([&] { during.step(); }, 2);
      std::vector<double> t_after, t_during;
      for (int r = 0; r < rounds; ++r) {
        t_after.push_back(bench::slowest_seconds_per_call([&] { after.step(); }, steps));
        t_during.push_back(bench::slowest_seconds_per_call([&] { during.step(); }, steps));
      }
      const double a = bench::median(t_after), d = bench::median(t_during);
      worst = std::min(worst, a / d);
      if (comm->rank() == 0)
        std::printf("| %lld MiB | %.1f | %.1f | %.3f |\n", static_cast<long long>(mib), a * 1e3,
                    d * 1e3, a / d);
    }
    if (comm->rank() == 0)
      std::printf("\noverlap_vs_no_overlap at its lowest: %.3f; load average after: %s\n", worst,
                  bench::load_average().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mpi_ddp_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
