// The op profiler behind `minitrain train --profile-kernels` (core/op_profiler.h): only the
// outermost op of a thread is a row, nothing is recorded without a profiler, an interval's rows
// are its own, and one profiler at a time.

#include "core/op_profiler.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "core/error.h"

namespace minitrain {
namespace {

void busy_for(std::chrono::microseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(OpProfiler, OnlyTheOutermostOpOfAThreadIsARowAndItsTimeIncludesTheInnerOnes) {
  OpProfiler profiler;
  {
    const OpTimer outer("outer", Device::cpu());
    busy_for(std::chrono::microseconds(200));
    {
      const OpTimer inner("inner", Device::cpu());
      busy_for(std::chrono::microseconds(300));
    }
  }
  { const OpTimer outer("outer", Device::cpu()); }
  const OpProfiler::Interval got = profiler.close_interval();
  ASSERT_EQ(got.rows.size(), 1u);
  EXPECT_EQ(got.rows[0].op, "outer");
  EXPECT_EQ(got.rows[0].device, Device::cpu());
  EXPECT_EQ(got.rows[0].calls, 2);
  EXPECT_GE(got.rows[0].seconds, 500e-6);
  EXPECT_GE(got.wall_seconds, got.rows[0].seconds);
}

TEST(OpProfiler, RecordsNothingWithoutAProfilerAndEachIntervalOnlyItsOwnOps) {
  { const OpTimer before("before", Device::cpu()); }
  OpProfiler profiler;
  { const OpTimer a("a", Device::cpu()); }
  const OpProfiler::Interval first = profiler.close_interval();
  ASSERT_EQ(first.rows.size(), 1u);
  EXPECT_EQ(first.rows[0].op, "a");
  { const OpTimer b("b", Device::cpu()); }
  std::thread other([] { const OpTimer c("c", Device::cpu()); });  // other threads count too
  other.join();
  const OpProfiler::Interval second = profiler.close_interval();
  ASSERT_EQ(second.rows.size(), 2u);
  EXPECT_EQ(second.rows[0].op, "b");
  EXPECT_EQ(second.rows[1].op, "c");
  EXPECT_TRUE(profiler.close_interval().rows.empty());
}

TEST(OpProfiler, ASecondProfilerIsRefusedWhileTheFirstLives) {
  {
    OpProfiler first;
    EXPECT_EQ(OpProfiler::active(), &first);
    EXPECT_THROW(OpProfiler second, DeviceError);
  }
  EXPECT_EQ(OpProfiler::active(), nullptr);
  OpProfiler again;  // the first one's end frees the place
  EXPECT_EQ(OpProfiler::active(), &again);
}

}  // namespace
}  // namespace minitrain
