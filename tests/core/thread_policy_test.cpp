// The thread policy: cgroup quotas read as whole cores, the affinity mask honoured, and the
// default thread count within both.

#include "core/thread_policy.h"

#include <gtest/gtest.h>

#include <sched.h>

#include "core/parallel_for.h"

namespace minitrain {
namespace {

TEST(ThreadPolicy, CpuMaxQuotasAreWholeCoresRoundedUp) {
  EXPECT_EQ(cores_from_cpu_max("200000 100000"), 2);
  EXPECT_EQ(cores_from_cpu_max("150000 100000"), 2);  // 1.5 cores: two threads can use them
  EXPECT_EQ(cores_from_cpu_max("50000 100000"), 1);
  EXPECT_EQ(cores_from_cpu_max("max 100000"), 0);  // no quota
  EXPECT_EQ(cores_from_cpu_max("-1 100000"), 0);   // cgroup v1's "no quota"
  EXPECT_EQ(cores_from_cpu_max(""), 0);
  EXPECT_EQ(cores_from_cpu_max("garbage"), 0);
}

// Affinity is per thread: pin this one to a single CPU, and it may use one core.
TEST(ThreadPolicy, AvailableCoresFollowTheAffinityMask) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof before, &before), 0);
  const int all = available_cores();
  EXPECT_GE(all, 1);
  EXPECT_LE(all, CPU_COUNT(&before));
  int first = 0;
  while (!CPU_ISSET(first, &before)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  EXPECT_EQ(available_cores(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof before, &before), 0);
  EXPECT_EQ(available_cores(), all);
}

TEST(ThreadPolicy, DefaultThreadsStayWithinTheAvailableCores) {
  set_num_threads(0);  // the default
  EXPECT_GE(num_threads(), 1);
  if (std::getenv("OMP_NUM_THREADS") == nullptr) {
    EXPECT_LE(num_threads(), available_cores());
  }
}

}  // namespace
}  // namespace minitrain
