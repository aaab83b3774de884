// init_process_group under mpirun (run with -n 2 and -n 3 by ctest; every rank runs every test):
// the environment mpirun set, the communicator it gives, and a collective through it.

#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "core/device.h"
#include "core/error.h"
#include "parallel/launch/process_env.h"
#include "parallel/launch/process_group.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  EXPECT_NE(v, nullptr) << name << " is not set: run this program under mpirun";
  return v ? std::atoi(v) : -1;
}

TEST(ProcessGroupMpi, EnvironmentComesFromMpirun) {
  const ProcessEnv env = detect_process_env();
  EXPECT_EQ(env.source, "mpi");
  EXPECT_TRUE(env.under_mpi());
  EXPECT_EQ(env.rank, env_int("OMPI_COMM_WORLD_RANK"));
  EXPECT_EQ(env.world_size, env_int("OMPI_COMM_WORLD_SIZE"));
  EXPECT_EQ(env.local_rank, env_int("OMPI_COMM_WORLD_LOCAL_RANK"));
  EXPECT_EQ(env.local_world_size, env_int("OMPI_COMM_WORLD_LOCAL_SIZE"));
  int mpi_rank = -1, mpi_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &mpi_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &mpi_size);
  EXPECT_EQ(env.rank, mpi_rank);
  EXPECT_EQ(env.world_size, mpi_size);
}

TEST(ProcessGroupMpi, CpuGroupAllReducesTheSumOfEveryRank) {
  const ProcessEnv env = detect_process_env();
  for (const char* backend : {"mpi", "auto"}) {
    ProcessGroupOptions options;
    options.backend = backend;
    options.comm.timeout = std::chrono::seconds(30);
    const Device device = rank_device(Device::cpu(), env);
    ASSERT_EQ(device, Device::cpu());
    auto comm = init_process_group(env, device, options);
    ASSERT_NE(comm, nullptr);
    EXPECT_EQ(comm->backend(), "mpi");
    EXPECT_EQ(comm->rank(), env.rank);
    EXPECT_EQ(comm->size(), env.world_size);
    // Rank r holds (r + 1) * (i + 1): every rank must end with (i + 1) * n (n + 1) / 2. An odd
    // length.
    const int64_t n = 7;
    std::vector<float> mine(n);
    for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>((env.rank + 1) * (i + 1));
    Tensor t = Tensor::from_vector(mine, Shape({n}));
    comm->all_reduce(t, ReduceOp::Sum);
    const int64_t ranks = env.world_size;
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(t.data<float>()[i], static_cast<float>((i + 1) * ranks * (ranks + 1) / 2))
          << backend << " element " << i;
  }
}

TEST(ProcessGroupMpi, AnEnvironmentThatContradictsMpirunIsACommError) {
  ProcessEnv env = detect_process_env();
  env.world_size += 1;  // as if another launcher's WORLD_SIZE leaked into the job
  ProcessGroupOptions options;
  options.backend = "mpi";
  const std::string msg =
      ::minitrain::testing::error_message([&] { init_process_group(env, Device::cpu(), options); });
  EXPECT_NE(msg.find("MPI says rank " + std::to_string(env.rank) + " of " +
                     std::to_string(env.world_size - 1)),
            std::string::npos)
      << msg;
}

TEST(ProcessGroupMpi, NcclWithoutAGpuPerRankIsADeviceError) {
  const ProcessEnv env = detect_process_env();
  if (cuda_device_count() > env.local_rank)
    GTEST_SKIP() << "this rank has a GPU: see ProcessGroupMpiCuda";
  ProcessGroupOptions options;
  options.backend = "nccl";
  // Every rank fails before any collective, so no rank waits for another.
  EXPECT_THROW(init_process_group(env, Device::cuda(env.local_rank), options), DeviceError);
  EXPECT_THROW(rank_device(Device::cuda(), env), DeviceError);
}

// The NCCL id made by rank 0 reaches the others by MPI broadcast (no rendezvous file), then an
// all-reduce on each rank's own GPU. Needs one GPU per rank of this machine.
TEST(ProcessGroupMpiCuda, NcclIdTravelsByMpiBroadcast) {
  if (cuda_emulated()) GTEST_SKIP() << "needs NCCL on real GPUs (the emulated GPUs have none)";
  const ProcessEnv env = detect_process_env();
  const int gpus = cuda_device_count();
  if (gpus < env.local_world_size)
    GTEST_SKIP() << "needs " << env.local_world_size << " GPUs, this machine has " << gpus;
  ProcessGroupOptions options;
  options.backend = "auto";
  options.rendezvous_dir = "/nonexistent";  // proves the file rendezvous is not used under mpirun
  options.init_timeout = std::chrono::seconds(60);
  const Device device = rank_device(Device::cuda(), env);
  ASSERT_EQ(device, Device::cuda(env.local_rank));
  auto comm = init_process_group(env, device, options);
  EXPECT_EQ(comm->backend(), "nccl");
  EXPECT_EQ(comm->rank(), env.rank);
  const int64_t n = 333;
  std::vector<float> mine(n);
  for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>((env.rank + 1) * (i % 5 + 1));
  Tensor t = Tensor::from_vector(mine, Shape({n}), device);
  comm->all_reduce(t, ReduceOp::Sum);
  Tensor got = t.to(Device::cpu());
  const int64_t ranks = env.world_size;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got.data<float>()[i], static_cast<float>((i % 5 + 1) * ranks * (ranks + 1) / 2))
        << "element " << i;
}

}  // namespace
}  // namespace minitrain
