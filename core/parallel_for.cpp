#include "core/parallel_for.h"

#include <omp.h>

#include <atomic>
#include <thread>

namespace minitrain {

namespace {
int default_threads() {
  const int omp = omp_get_max_threads();  // honours OMP_NUM_THREADS
  return omp > 0 ? omp : static_cast<int>(std::thread::hardware_concurrency());
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
