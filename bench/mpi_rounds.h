#pragma once
// Timing for the benchmarks run under mpirun (mpi_allreduce_bench, mpi_ddp_bench): not Google
// Benchmark, since every rank of a collective must run the same number of iterations. A round
// times a fixed number of calls between barriers, the slowest rank's time counting (as
// nccl-tests does); the median round gives the figure, so a burst of load on the machine during
// one round moves it little.

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace minitrain::bench {

/// Seconds per call of `run` over `iters` calls: the slowest rank's mean.
inline double slowest_seconds_per_call(const std::function<void()>& run, int iters) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) run();
  double mine =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / iters;
  double slowest = 0;
  MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The 1, 5 and 15 minute load averages, printed beside the figures.
inline std::string load_average() {
  double load[3] = {0, 0, 0};
  if (getloadavg(load, 3) != 3) return "unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %.2f %.2f", load[0], load[1], load[2]);
  return text;
}

}  // namespace minitrain::bench
