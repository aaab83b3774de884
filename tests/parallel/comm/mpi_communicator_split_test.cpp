// Communicator::split on the MPI backend (MPI_Comm_split after a barrier with the deadline),
// under mpirun: 1 to 8 ranks on the CPU, and the *Cuda* cases (members on GPUs, staged through
// pinned host memory) with 2 and 3 ranks, labelled gpu (tests/parallel/CMakeLists.txt). Each
// group receives the sums of its own members only (tests/parallel/comm/split_checks.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "parallel/comm/mpi_communicator.h"
#include "tests/parallel/comm/split_checks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_group_exchanges;
using ::testing::HasSubstr;
using testing::split_members;

std::unique_ptr<MpiCommunicator> world(Device device = Device::cpu(),
                                       std::chrono::milliseconds timeout = std::chrono::seconds(20),
                                       AllReduceAlgorithm algorithm = AllReduceAlgorithm::Native) {
  CommOptions o;
  o.timeout = timeout;
  o.all_reduce = algorithm;
  return MpiCommunicator::world(o, device);
}

// Parity groups with reversed keys: rank r joins group r % 2 at the place of key n - r, so each
// group's order is the reverse of the parent's.
std::vector<std::pair<int, int>> parity_reversed(int n) {
  std::vector<std::pair<int, int>> out;
  for (int r = 0; r < n; ++r) out.emplace_back(r % 2, n - r);
  return out;
}

TEST(MpiCommunicatorSplit, ParityGroupsExchangeWithTheirOwnMembersOnly) {
  auto comm = world();
  const auto requests = parity_reversed(comm->size());
  const auto [color, key] = requests[comm->rank()];
  std::unique_ptr<Communicator> part = comm->split(color, key);
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->backend(), "mpi");
  EXPECT_EQ(part->device(), Device::cpu());
  expect_group_exchanges(*part, split_members(requests, color), comm->rank());
  comm->barrier();
}

TEST(MpiCommunicatorSplit, NoColorRankGetsNullAndTheOthersGoOn) {
  auto comm = world();
  std::vector<std::pair<int, int>> requests(comm->size(), {0, 0});
  requests[0].first = Communicator::kNoColor;
  auto part = comm->split(requests[comm->rank()].first, 0);
  if (comm->rank() == 0) {
    EXPECT_EQ(part, nullptr);
  } else {
    ASSERT_NE(part, nullptr);
    expect_group_exchanges(*part, split_members(requests, 0), comm->rank());
  }
  comm->barrier();  // the parent stays usable
}

TEST(MpiCommunicatorSplit, TheSplitOutlivesItsParentAndKeepsItsOptions) {
  auto comm = world(Device::cpu(), std::chrono::seconds(17), AllReduceAlgorithm::Ring);
  const int rank = comm->rank(), size = comm->size();
  std::unique_ptr<Communicator> part = comm->split(0, rank);
  comm.reset();
  ASSERT_NE(part, nullptr);
  EXPECT_EQ(part->options().all_reduce, AllReduceAlgorithm::Ring);
  EXPECT_EQ(part->options().timeout, std::chrono::seconds(17));
  std::vector<int> everyone(size);
  for (int r = 0; r < size; ++r) everyone[r] = r;
  expect_group_exchanges(*part, everyone, rank);  // all_reduce through the ring here
}

TEST(MpiCommunicatorSplit, NegativeColorIsAValueErrorNamingIt) {
  auto comm = world();
  const std::string msg = testing::error_message([&] { comm->split(-2, 0); });
  EXPECT_THAT(msg, HasSubstr("rank " + std::to_string(comm->rank()) + " passed color -2"));
  EXPECT_THROW(comm->split(-2, 0), ValueError);
  comm->barrier();  // a refused color is refused before any exchange: the parent is still fine
}

// Rank 1 never calls split: the others get CommError naming the operation and themselves within
// the deadline (MPI_Comm_split alone would wait for ever). The job then goes on.
TEST(MpiCommunicatorSplit, RankThatNeverSplitsIsACommErrorWithinTheDeadline) {
  auto sync = world();
  if (sync->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  {
    auto comm = world(Device::cpu(), std::chrono::milliseconds(300));
    if (comm->rank() != 1) {
      const auto start = std::chrono::steady_clock::now();
      const std::string msg = testing::error_message([&] { comm->split(0, 0); });
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      EXPECT_THAT(msg, HasSubstr("split: rank " + std::to_string(comm->rank()) + " waited"));
      EXPECT_GE(waited, 0.29);
      EXPECT_LT(waited, 10.0);  // generous: oversubscribed CI cores
    }
  }
  sync->barrier();
}

// ---- members on GPUs (Note [staging CUDA tensors through MPI]); each process's own GPUs ----

TEST(MpiCommunicatorSplitCuda, MembersOnAnotherGpuOrTheCpuExchangeThere) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  auto on_gpu0 = world(Device::cuda(0));
  const int rank = on_gpu0->rank();
  const auto requests = parity_reversed(on_gpu0->size());
  const auto [color, key] = requests[rank];
  const std::vector<int> members = split_members(requests, color);
  // A GPU parent, members on its process's second GPU (the hybrid's second stage) ...
  auto on_gpu1 = on_gpu0->split(color, key, Device::cuda(1));
  ASSERT_NE(on_gpu1, nullptr);
  EXPECT_EQ(on_gpu1->device(), Device::cuda(1));
  expect_group_exchanges(*on_gpu1, members, rank);
  // ... or on the CPU; and a CPU parent with members on a GPU.
  auto on_cpu = on_gpu0->split(color, key, Device::cpu());
  ASSERT_NE(on_cpu, nullptr);
  EXPECT_EQ(on_cpu->device(), Device::cpu());
  expect_group_exchanges(*on_cpu, members, rank);
  auto cpu_parent = world();
  auto from_cpu = cpu_parent->split(color, key, Device::cuda(1));
  ASSERT_NE(from_cpu, nullptr);
  EXPECT_EQ(from_cpu->device(), Device::cuda(1));
  expect_group_exchanges(*from_cpu, members, rank);
  on_gpu0->barrier();
}

}  // namespace
}  // namespace minitrain
