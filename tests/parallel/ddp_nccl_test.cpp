// DistributedDataParallel on the NCCL backend (CUDA builds only): one process, one thread per GPU
// (make_nccl_communicators), against one device on the global batch. Needs 2 GPUs; every case is
// named *Cuda* (ctest label gpu) and skips, with the reason, on a machine without them.
//
// Tolerance: the reference runs on the CPU; cuBLAS sums a GEMM's terms in another order than the
// CPU GEMM and the GPU's tanh differs by an ulp, so the weights after a few steps agree to about
// 1e-5 relative; rtol 1e-4 and atol 1e-5 leave room for that and still catch a wrong average (a
// factor of 2) or a missed broadcast (weights off by O(0.1)).

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stream.h"
#include "parallel/comm/nccl_communicator.h"
#include "tests/parallel/ddp_test_util.h"
#include "tests/parallel/run_ranks.h"

namespace minitrain {
namespace {

using namespace testing::ddp;

constexpr double kGpuAtol = 1e-5, kGpuRtol = 1e-4;

#define SKIP_UNLESS_GPUS(n)                                                                     \
  do {                                                                                          \
    if (cuda_device_count() < (n))                                                              \
      GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << cuda_device_count()      \
                   << (cuda_device_count() == 0 ? " (" + cuda_unavailable_reason() + ")" : ""); \
  } while (0)

std::vector<Device> gpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cuda(i));
  return d;
}

// Initialised on the CPU from the rank's seed, then moved: the same values as the reference's.
ModelFactory mlp_on_device() {
  return [](uint64_t seed, Device d) -> std::unique_ptr<Module> {
    auto m = mlp(seed);
    m->to(d);
    return m;
  };
}

std::vector<Weights> train_gpus(int world, const Case& c, CommOptions options = {}) {
  auto comms = make_nccl_communicators(gpus(world), options);
  std::vector<Weights> out(world);
  testing::run_ranks(comms, [&](Communicator& comm) {
    DeviceGuard guard(comm.device());  // this thread's kernels and allocations go to its GPU
    out[comm.rank()] = train_ddp(comm, c);
  });
  return out;
}

void expect_ranks_match(const std::vector<Weights>& got, const Weights& want,
                        const std::string& what) {
  for (std::size_t r = 0; r < got.size(); ++r) {
    expect_weights_close(got[r], want, what + " rank " + std::to_string(r), kGpuAtol, kGpuRtol);
    // NCCL gives every rank the same reduced bytes, so the replicas stay bit-identical.
    EXPECT_EQ(got[r], got[0]) << what << ": rank " << r << " drifted from rank 0";
  }
}

TEST(DdpNcclCuda, MatchesOneDeviceSgdMomentumAndAdam) {
  SKIP_UNLESS_GPUS(2);
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()})
    for (bool overlap : {true, false}) {
      Case c;
      c.opt = oc;
      c.ddp.overlap = overlap;  // overlap: the side stream, ordered by events
      c.ddp.bucket_bytes = 200;
      c.model = mlp_on_device();
      expect_ranks_match(train_gpus(2, c), train_one_device(c, 2), c.str());
    }
}

TEST(DdpNcclCuda, NoSyncAccumulationMatchesTheCombinedBatch) {
  SKIP_UNLESS_GPUS(2);
  Case c;
  c.opt = adam();
  c.micro_batches = 2;
  c.model = mlp_on_device();
  expect_ranks_match(train_gpus(2, c), train_one_device(c, 2), c.str());
}

TEST(DdpNcclCuda, RingAllReduceMatchesOneDevice) {
  SKIP_UNLESS_GPUS(2);
  CommOptions ring;
  ring.all_reduce = AllReduceAlgorithm::Ring;
  Case c;
  c.opt = sgd_momentum();
  c.ddp.bucket_bytes = 1;
  c.model = mlp_on_device();
  expect_ranks_match(train_gpus(2, c, ring), train_one_device(c, 2), "ring " + c.str());
}

TEST(DdpNcclCuda, ParameterOnTheCpuIsDeviceError) {
  SKIP_UNLESS_GPUS(2);
  auto comms = make_nccl_communicators(gpus(2));
  std::vector<std::string> msgs(2);
  testing::run_ranks(comms, [&](Communicator& comm) {
    msgs[comm.rank()] = testing::error_message([&] { DistributedDataParallel(mlp(kSeed), comm); });
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(msgs[r].find("parameter '0.weight' is on cpu"), std::string::npos) << msgs[r];
}

}  // namespace
}  // namespace minitrain
