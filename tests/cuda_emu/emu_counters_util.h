#pragma once
// The counters of one launch, for the counter tests: collection switched on around exactly the
// launch, so a test's own copies and syncs are not in the figures it checks.

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "cuda_emu/counters.h"

namespace minitrain::emu_testing {

/// Runs `launch` (one kernel launch) with the counters collecting and returns its record; a
/// failed sync or a launch count other than one fails the calling test.
inline mtemu::LaunchCounters counters_of_one_launch(const std::function<void()>& launch) {
  mtemu::counters_take();
  mtemu::counters_collect(true);
  launch();
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  mtemu::counters_collect(false);
  std::vector<mtemu::LaunchCounters> got = mtemu::counters_take();
  EXPECT_EQ(got.size(), 1u);
  return got.empty() ? mtemu::LaunchCounters{} : got[0];
}

}  // namespace minitrain::emu_testing
