// Communicator::split on the NCCL backend (CUDA builds only; Note [NCCL split onto another GPU]):
// one process, one thread per GPU. Members that keep their GPUs come from ncclCommSplit, members
// on other GPUs from a fresh NCCL id per group; each group receives the sums of its own members
// only (tests/parallel/comm/split_checks.h). Every case is named *Cuda* (ctest label gpu) and
// skips, with the reason, without 2 GPUs: NCCL needs real ones.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "parallel/comm/nccl_communicator.h"
#include "tests/parallel/comm/split_checks.h"
#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_group_exchanges;
using ::testing::HasSubstr;
using testing::split_members;

std::vector<Device> first_gpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cuda(i));
  return d;
}

// One group in reverse order on the same GPUs (ncclCommSplit), then parity groups.
TEST(NcclCommunicatorSplitCuda, MembersOnTheirOwnGpusComeFromNcclCommSplit) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);  // NCCL needs real GPUs
  const int n = std::min(cuda_device_count(), 8);
  auto comms = make_nccl_communicators(first_gpus(n));
  std::vector<std::pair<int, int>> reversed, parity;
  for (int r = 0; r < n; ++r) {
    reversed.emplace_back(0, n - r);
    parity.emplace_back(r % 2, r);
  }
  testing::run_ranks(comms, [&](Communicator& comm) {
    const int r = comm.rank();
    auto all = comm.split(reversed[r].first, reversed[r].second);
    ASSERT_NE(all, nullptr);
    EXPECT_EQ(all->device(), comm.device());
    expect_group_exchanges(*all, split_members(reversed, 0), r);
    auto half = comm.split(parity[r].first, parity[r].second);
    ASSERT_NE(half, nullptr);
    expect_group_exchanges(*half, split_members(parity, parity[r].first), r);
  });
}

// The hybrid's case: each rank's member on another GPU than its parent (here the ranks swap).
TEST(NcclCommunicatorSplitCuda, MembersOnOtherGpusJoinAFreshIdPerGroup) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);  // NCCL needs real GPUs
  auto comms = make_nccl_communicators(first_gpus(2));
  const std::vector<std::pair<int, int>> one_group = {{0, 0}, {0, 1}};
  testing::run_ranks(comms, [&](Communicator& comm) {
    const Device other = Device::cuda(1 - comm.device().index());
    auto moved = comm.split(0, comm.rank(), other);
    ASSERT_NE(moved, nullptr);
    EXPECT_EQ(moved->device(), other);
    expect_group_exchanges(*moved, split_members(one_group, 0), comm.rank());
  });
}

TEST(NcclCommunicatorSplitCuda, TwoMembersOnOneGpuAreRefusedOnEveryRank) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);  // NCCL needs real GPUs
  auto comms = make_nccl_communicators(first_gpus(2));
  std::vector<std::string> msgs(2);
  testing::run_ranks(comms, [&](Communicator& comm) {
    msgs[comm.rank()] = testing::error_message([&] { comm.split(0, 0, Device::cuda(0)); });
  });
  for (int r = 0; r < 2; ++r) {
    EXPECT_THAT(msgs[r], HasSubstr("split: ranks 0 and 1 would share one GPU")) << r;
    EXPECT_THAT(msgs[r], HasSubstr("--backend mpi")) << r;
  }
}

TEST(NcclCommunicatorSplitCuda, CpuMemberIsADeviceError) {
  MT_SKIP_UNLESS_CUDA_DEVICES(1);  // NCCL needs a real GPU
  auto comms = make_nccl_communicators({Device::cuda(0)});
  EXPECT_THROW(comms[0]->split(0, 0, Device::cpu()), DeviceError);
}

}  // namespace
}  // namespace minitrain
