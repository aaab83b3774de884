#pragma once
// CPU threading: loops split over OpenMP threads where the work is large enough to pay for the
// fork/join (about a few microseconds), run inline otherwise. Eigen's GEMM uses the same pool.

#include <algorithm>
#include <cstdint>

namespace minitrain {

int num_threads() noexcept;
/// Sets the CPU threads for minitrain loops and Eigen; n <= 0 restores the default (cores).
void set_num_threads(int n);

/// Calls f(begin, end) over [0, n) in contiguous chunks, in parallel when n >= 2 * grain.
template <typename F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int threads = num_threads();
  if (threads <= 1 || n < 2 * grain) {
    f(int64_t(0), n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads, n / grain);
#pragma omp parallel for num_threads(static_cast <int>(chunks)) schedule(static)
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    f(begin, end);
  }
}

/// Calls f(i) for every i in [0, n), each thread taking the next i when it finishes one: for a
/// few coarse tasks (GEMM tiles), where a thread that starts late (a wake-up) or loses its core
/// leaves its share to the others. Inline for n < 2 or one thread. Which thread runs a task varies
/// from run to run: f(i)'s result must not depend on it.
template <typename F>
void parallel_tasks(int64_t n, F&& f) {
  const int threads = num_threads();
  if (threads <= 1 || n < 2) {
    for (int64_t i = 0; i < n; ++i) f(i);
    return;
  }
#pragma omp parallel for num_threads(static_cast <int>(std::min <int64_t>(threads, n))) \
    schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) f(i);
}

/// Elementwise loops: below this many elements one thread is faster than two.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

}  // namespace minitrain
