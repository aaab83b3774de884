// Communicator::split on the threads backend (Note [splitting a communicator]): each group
// receives the sums of its own members only, ranked by key and then by parent rank; a kNoColor
// rank gets null; members may live on other devices than their parent; a bad color and a rank
// that never comes are errors, not hangs.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "parallel/comm/thread_communicator.h"
#include "tests/parallel/comm/split_checks.h"
#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_group_exchanges;
using ::testing::HasSubstr;
using testing::run_cpu_ranks;
using testing::run_ranks;
using testing::split_members;

CommOptions options(std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
  CommOptions o;
  o.timeout = timeout;
  return o;
}

// Parity groups with reversed keys: rank r joins group r % 2 at the place of key n - r, so each
// group's order is the reverse of the parent's.
std::vector<std::pair<int, int>> parity_reversed(int n) {
  std::vector<std::pair<int, int>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(r % 2, n - r);
  return out;
}

TEST(ThreadCommunicatorSplit, ParityGroupsExchangeWithTheirOwnMembersOnly) {
  for (int n = 1; n <= 6; ++n) {
    SCOPED_TRACE("ranks " + std::to_string(n));
    const auto requests = parity_reversed(n);
    run_cpu_ranks(n, options(), [&](Communicator& comm) {
      const auto [color, key] = requests[comm.rank()];
      std::unique_ptr<Communicator> part = comm.split(color, key);
      ASSERT_NE(part, nullptr);
      EXPECT_EQ(part->backend(), "threads");
      EXPECT_EQ(part->device(), comm.device());
      expect_group_exchanges(*part, split_members(requests, color), comm.rank());
    });
  }
}

TEST(ThreadCommunicatorSplit, EqualKeysKeepTheParentOrderAndSplitsRepeat) {
  // The same split twice over: every split makes new groups (none left from the one before).
  const int n = 4;
  std::vector<std::pair<int, int>> one_group(n, {7, 0});
  run_cpu_ranks(n, options(), [&](Communicator& comm) {
    for (int round = 0; round < 2; ++round) {
      auto part = comm.split(7, 0);
      ASSERT_NE(part, nullptr);
      EXPECT_EQ(part->rank(), comm.rank());
      expect_group_exchanges(*part, split_members(one_group, 7), comm.rank());
    }
  });
}

TEST(ThreadCommunicatorSplit, NoColorRankGetsNullAndTheGroupGoesOnWithoutIt) {
  const int n = 3;
  std::vector<std::pair<int, int>> requests = {{Communicator::kNoColor, 0}, {0, 0}, {0, 0}};
  run_cpu_ranks(n, options(), [&](Communicator& comm) {
    auto part = comm.split(requests[comm.rank()].first, 0);
    if (comm.rank() == 0) {
      EXPECT_EQ(part, nullptr);
    } else {
      ASSERT_NE(part, nullptr);
      expect_group_exchanges(*part, split_members(requests, 0), comm.rank());
    }
    comm.barrier();  // the parent stays usable
  });
}

TEST(ThreadCommunicatorSplit, TheSplitOutlivesItsParent) {
  auto comms = make_thread_communicators({Device::cpu(), Device::cpu()}, options());
  std::vector<std::unique_ptr<Communicator>> parts(2);
  run_ranks(comms, [&](Communicator& comm) { parts[comm.rank()] = comm.split(0, comm.rank()); });
  comms.clear();
  run_ranks(parts, [&](Communicator& part) { expect_group_exchanges(part, {0, 1}, part.rank()); });
}

TEST(ThreadCommunicatorSplit, NegativeColorIsAValueErrorNamingIt) {
  run_cpu_ranks(1, options(), [&](Communicator& comm) {
    const std::string msg = testing::error_message([&] { comm.split(-3, 0); });
    EXPECT_THAT(msg, HasSubstr("rank 0 passed color -3"));
    EXPECT_THAT(msg, HasSubstr("kNoColor"));
    EXPECT_THROW(comm.split(-3, 0), ValueError);
  });
}

TEST(ThreadCommunicatorSplit, UnavailableDeviceIsADeviceError) {
  run_cpu_ranks(1, options(), [&](Communicator& comm) {
    EXPECT_THROW(comm.split(0, 0, Device::cuda(cuda_device_count() + 5)), DeviceError);
  });
}

TEST(ThreadCommunicatorSplit, RankThatNeverSplitsIsACommErrorNamingIt) {
  auto comms = make_thread_communicators({Device::cpu(), Device::cpu()},
                                         options(std::chrono::milliseconds(200)));
  std::string msg;
  auto errors = testing::run_ranks_collect(comms, [&](Communicator& comm) {
    if (comm.rank() == 1) return;
    msg = testing::error_message([&] { comm.split(0, 0); });
  });
  EXPECT_FALSE(errors[0]);
  EXPECT_THAT(msg, HasSubstr("split: rank 0 waited"));
  EXPECT_THAT(msg, HasSubstr("for rank 1"));
}

// Members on other devices than their parent: the parents on the CPU, each member on a GPU (the
// hybrid's per-stage communicators), and back from a GPU parent to a CPU member.
TEST(ThreadCommunicatorSplitCuda, MembersOnGpusExchangeOnTheirOwnDevices) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  const int n = 3;
  const auto requests = parity_reversed(n);
  run_cpu_ranks(n, options(), [&](Communicator& comm) {
    const auto [color, key] = requests[comm.rank()];
    const Device gpu = Device::cuda(comm.rank() % 2);
    auto on_gpu = comm.split(color, key, gpu);
    ASSERT_NE(on_gpu, nullptr);
    EXPECT_EQ(on_gpu->device(), gpu);
    expect_group_exchanges(*on_gpu, split_members(requests, color), comm.rank());
    // Keyed by parent rank this time: the same members in ascending order.
    auto back_on_cpu = on_gpu->split(0, comm.rank(), Device::cpu());
    ASSERT_NE(back_on_cpu, nullptr);
    EXPECT_EQ(back_on_cpu->device(), Device::cpu());
    std::vector<int> ascending = split_members(requests, color);
    std::sort(ascending.begin(), ascending.end());
    expect_group_exchanges(*back_on_cpu, ascending, comm.rank());
  });
}

}  // namespace
}  // namespace minitrain
