#include "core/parallel_for.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

#include "core/thread_policy.h"

namespace minitrain {

namespace {
// OMP_NUM_THREADS when given; else the cores this process may use (its affinity and cgroup quota:
// libgomp's own default counts the affinity mask but not a container's CPU quota).
int default_threads() {
  const int omp = omp_get_max_threads();
  if (std::getenv("OMP_NUM_THREADS") != nullptr && omp > 0) return omp;
  return omp > 0 ? std::min(omp, available_cores()) : available_cores();
}
std::atomic<int>& threads_setting() {
  static std::atomic<int> n{default_threads()};
  return n;
}
}  // namespace

int num_threads() noexcept { return threads_setting().load(std::memory_order_relaxed); }

void set_num_threads(int n) {
  const int value = n > 0 ? n : default_threads();
  threads_setting().store(value);
  omp_set_num_threads(value);  // Eigen's GEMM reads OpenMP's setting
}

}  // namespace minitrain
