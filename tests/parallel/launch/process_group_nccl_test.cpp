// The nccl backend of init_process_group across processes, for machines with 2+ GPUs: this test
// program starts two copies of itself as ranks 0 and 1 (torchrun-style variables, the NCCL id
// through the shared-file rendezvous), each all-reduces on its own GPU and checks the sum.
// The copies run only NcclRankOfALaunchedJob; started by hand, that case skips.

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "core/device.h"
#include "parallel/launch/process_env.h"
#include "parallel/launch/process_group.h"
#include "parallel/launch/subprocess.h"

namespace minitrain {
namespace {

constexpr const char* kRankVariable = "MINITRAIN_TEST_NCCL_RANK";

TEST(ProcessGroupCuda, NcclRankOfALaunchedJob) {
  if (std::getenv(kRankVariable) == nullptr)
    GTEST_SKIP() << "runs only as a rank started by "
                    "ProcessGroupCuda.NcclRanksAllReduceThroughTheFileRendezvous";
  const ProcessEnv env = detect_process_env();
  ASSERT_EQ(env.source, "torchrun");
  const Device device = rank_device(Device::cuda(), env);
  EXPECT_EQ(device, Device::cuda(env.local_rank));
  ProcessGroupOptions options;
  options.backend = "nccl";
  options.init_timeout = std::chrono::seconds(60);
  options.comm.timeout = std::chrono::seconds(60);
  auto comm = init_process_group(env, device, options);
  EXPECT_EQ(comm->backend(), "nccl");
  EXPECT_EQ(comm->rank(), env.rank);
  EXPECT_EQ(comm->size(), env.world_size);
  const int64_t n = 1001;  // odd: not a multiple of any vector width
  std::vector<float> mine(n);
  for (int64_t i = 0; i < n; ++i) mine[i] = static_cast<float>((env.rank + 1) * (i % 17 + 1));
  Tensor t = Tensor::from_vector(mine, Shape({n}), device);
  comm->all_reduce(t, ReduceOp::Sum);
  Tensor got = t.to(Device::cpu());
  const int64_t ranks = env.world_size;
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(got.data<float>()[i], static_cast<float>((i % 17 + 1) * ranks * (ranks + 1) / 2))
        << "element " << i;
}

TEST(ProcessGroupCuda, NcclRanksAllReduceThroughTheFileRendezvous) {
  if (cuda_emulated()) GTEST_SKIP() << "needs NCCL on real GPUs (the emulated GPUs have none)";
  if (std::getenv(kRankVariable) != nullptr) GTEST_SKIP() << "a rank does not start ranks";
  const int gpus = cuda_device_count();
  if (gpus < 2)
    GTEST_SKIP() << "needs 2 GPUs, this machine has " << gpus << " (" << cuda_unavailable_reason()
                 << ")";
  const std::string job = "nccl-pg-test-" + std::to_string(::getpid());
  std::vector<Subprocess> ranks;
  for (int r = 0; r < 2; ++r) {
    SubprocessOptions o;
    o.argv = {self_executable(), "--gtest_filter=ProcessGroupCuda.NcclRankOfALaunchedJob"};
    o.env = {{"RANK", std::to_string(r)},
             {"WORLD_SIZE", "2"},
             {"LOCAL_RANK", std::to_string(r)},
             {"LOCAL_WORLD_SIZE", "2"},
             {"MINITRAIN_JOB_ID", job},
             {"MINITRAIN_RENDEZVOUS_DIR", ::testing::TempDir()},
             {kRankVariable, "1"}};
    ranks.push_back(Subprocess::start(o));
  }
  std::vector<std::string> output[2];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  bool done = false;
  while (!done && std::chrono::steady_clock::now() < deadline) {
    done = true;
    for (int r = 0; r < 2; ++r) {
      for (std::string& line : ranks[r].read_lines()) output[r].push_back(std::move(line));
      done = done && ranks[r].poll().has_value() && ranks[r].output_fd() < 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (int r = 0; r < 2; ++r) {
    std::string text;
    for (const std::string& line : output[r]) text += line + "\n";
    const std::optional<ExitStatus> ended =
        ranks[r].poll();  // still running at the deadline: stop it
    const ExitStatus s = ended ? *ended : ranks[r].terminate(std::chrono::seconds(1));
    EXPECT_TRUE(s.ok()) << "rank " << r << " ended with " << s.str() << ":\n" << text;
    EXPECT_NE(text.find("[  PASSED  ] 1 test"), std::string::npos) << "rank " << r << ":\n" << text;
    EXPECT_EQ(text.find("[  SKIPPED ]"), std::string::npos) << "rank " << r << " skipped:\n"
                                                            << text;
  }
}

}  // namespace
}  // namespace minitrain
