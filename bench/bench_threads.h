#pragma once
// The benchmarks' own flag, --threads=N: taken out of argv before Google Benchmark parses it, and
// applied to minitrain's CPU threads (and so to the OpenBLAS tiles and Eigen).

#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/parallel_for.h"

namespace minitrain::bench {

/// Removes --threads=N from argv (updating argc), sets minitrain's threads to N (or
/// `default_threads`) and returns the count used.
inline int take_threads_flag(int& argc, char** argv, int default_threads) {
  int threads = default_threads;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0)
      threads = std::atoi(argv[i] + 10);
    else
      rest.push_back(argv[i]);
  }
  for (size_t i = 0; i < rest.size(); ++i) argv[i] = rest[i];
  argc = static_cast<int>(rest.size());
  set_num_threads(threads);
  return threads;
}

}  // namespace minitrain::bench
