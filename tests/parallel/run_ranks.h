#pragma once
// Test helpers for communicators: run one lambda per rank, each on its own thread with its own
// communicator, and the small-integer fills whose sums, averages and maxima are exact.

#include <exception>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "core/tensor.h"
#include "parallel/comm/communicator.h"
#include "parallel/comm/thread_communicator.h"

namespace minitrain::testing {

/// Runs fn(comm) for every rank of `comms` on its own thread, joins them all, and returns each
/// rank's exception (null where it returned normally).
inline std::vector<std::exception_ptr> run_ranks_collect(
    std::vector<std::unique_ptr<Communicator>>& comms,
    const std::function<void(Communicator&)>& fn) {
  std::vector<std::exception_ptr> errors(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r)
    threads.emplace_back([&, r] {
      try {
        fn(*comms[r]);
      } catch (...) {
        errors[r] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

/// The same, rethrowing the first rank's exception (in rank order).
inline void run_ranks(std::vector<std::unique_ptr<Communicator>>& comms,
                      const std::function<void(Communicator&)>& fn) {
  for (auto& e : run_ranks_collect(comms, fn))
    if (e) std::rethrow_exception(e);
}

/// n CPU ranks of the threads backend, fn run on each.
inline void run_cpu_ranks(int n, CommOptions options,
                          const std::function<void(Communicator&)>& fn) {
  auto comms = make_thread_communicators(std::vector<Device>(n, Device::cpu()), options);
  run_ranks(comms, fn);
}

/// Rank r's element i: an integer in [-4, 4] that depends on both, so sums over 8 ranks stay
/// far inside float32's exact integers.
inline double rank_value(int rank, int64_t i) {
  return static_cast<double>((i * 7 + rank * 3 + (i / 5) * rank) % 9) - 4.0;
}

inline Tensor rank_tensor(int rank, int64_t n, DType dtype, Device device = Device::cpu()) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = rank_value(rank, i);
  if (dtype == DType::Float64) return Tensor::from_vector(v, {n}, device);
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), {n}, device);
}

}  // namespace minitrain::testing
