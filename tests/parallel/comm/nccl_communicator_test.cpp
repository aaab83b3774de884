// The NCCL backend against the values each rank should receive (CUDA builds only). One process,
// one thread per GPU, as DataParallel drives it. Every case is named *Cuda* (ctest label gpu)
// and skips, with the reason, on a machine without enough GPUs.

#include "parallel/comm/nccl_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "tests/parallel/run_ranks.h"

namespace minitrain {
namespace {

const std::vector<int64_t> kLengths = {0, 1, 7, 1000, 65539};

float value(int rank, int64_t i) { return static_cast<float>((i * 7 + rank * 3 + i / 5) % 9 - 4); }

Tensor rank_tensor(int rank, int64_t n, Device d, int64_t offset = 0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, offset + i);
  return Tensor::from_vector(v, {n}, d);
}

std::vector<Device> gpus(int n) {
  std::vector<Device> d;
  for (int i = 0; i < n; ++i) d.push_back(Device::cuda(i));
  return d;
}

#define SKIP_UNLESS_GPUS(n)                                                                     \
  do {                                                                                          \
    if (cuda_device_count() < (n))                                                              \
      GTEST_SKIP() << "needs " << (n) << " GPUs, this machine has " << cuda_device_count()      \
                   << (cuda_device_count() == 0 ? " (" + cuda_unavailable_reason() + ")" : ""); \
  } while (0)

// Every collective on one rank, checked against the values all ranks put in.
void check_collectives(Communicator& comm) {
  const int size = comm.size(), rank = comm.rank();
  const Device d = comm.device();
  for (int64_t n : kLengths) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      Tensor t = rank_tensor(rank, n, d);
      comm.native_all_reduce(t, op);
      std::vector<float> got = t.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0.f, max = value(0, i);
        for (int r = 0; r < size; ++r) {
          sum += value(r, i);
          max = std::max(max, value(r, i));
        }
        const float want = op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? max : sum / size;
        MT_CHECK(std::abs(got[i] - want) <= (op == ReduceOp::Avg ? 1e-6f : 0.f), "all_reduce ",
                 reduce_op_name(op), " n=", n, " i=", i, ": got ", got[i], " want ", want);
      }
    }
    Tensor b = rank_tensor(rank, n, d);
    comm.broadcast(b, size - 1);
    std::vector<float> bv = b.to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      MT_CHECK(bv[i] == value(size - 1, i), "broadcast n=", n, " i=", i);

    Tensor in = rank_tensor(rank, n * size, d);
    Tensor out = Tensor::zeros({n}, DType::Float32, d);
    comm.reduce_scatter(out, in, ReduceOp::Sum);
    std::vector<float> rs = out.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.f;
      for (int r = 0; r < size; ++r) want += value(r, rank * n + i);
      MT_CHECK(rs[i] == want, "reduce_scatter n=", n, " i=", i, ": got ", rs[i], " want ", want);
    }

    Tensor gathered = Tensor::zeros({n * size}, DType::Float32, d);
    comm.all_gather(gathered, rank_tensor(rank, n, d));
    std::vector<float> ag = gathered.to_vector<float>();
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; ++i) MT_CHECK(ag[r * n + i] == value(r, i), "all_gather n=", n);

    const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    Tensor got = Tensor::zeros({n}, DType::Float32, d);
    comm.send_recv(rank_tensor(rank, n, d), next, got, prev);
    std::vector<float> sr = got.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) MT_CHECK(sr[i] == value(prev, i), "send_recv n=", n, " i=", i);
  }
  comm.barrier();
}

TEST(NcclCommunicatorCuda, SingleGpuCollectivesAreIdentity) {
  SKIP_UNLESS_GPUS(1);
  auto comms = make_nccl_communicators({Device::cuda(0)});
  ASSERT_EQ(comms.size(), 1u);
  EXPECT_EQ(comms[0]->backend(), "nccl");
  testing::run_ranks(comms, check_collectives);
}

TEST(NcclCommunicatorCuda, CollectivesAreExactAcrossGpus) {
  SKIP_UNLESS_GPUS(2);
  auto comms = make_nccl_communicators(gpus(std::min(cuda_device_count(), 8)));
  testing::run_ranks(comms, check_collectives);
}

TEST(NcclCommunicatorCuda, FromUniqueIdJoinsOneGroup) {
  SKIP_UNLESS_GPUS(2);
  const int n = std::min(cuda_device_count(), 8);
  const NcclUniqueId id = nccl_unique_id();
  std::vector<std::unique_ptr<Communicator>> comms(n);
  std::vector<std::thread> threads;  // ncclCommInitRank blocks until every rank has joined
  for (int r = 0; r < n; ++r)
    threads.emplace_back(
        [&, r] { comms[r] = NcclCommunicator::from_unique_id(id, r, n, Device::cuda(r)); });
  for (auto& t : threads) t.join();
  testing::run_ranks(comms, check_collectives);
}

TEST(NcclCommunicatorCuda, SendThenRecv) {
  SKIP_UNLESS_GPUS(2);
  auto comms = make_nccl_communicators(gpus(2));
  testing::run_ranks(comms, [](Communicator& comm) {
    const Device d = comm.device();
    if (comm.rank() == 0) comm.send(rank_tensor(0, 1000, d), 1);
    if (comm.rank() == 1) {
      Tensor t = Tensor::zeros({1000}, DType::Float32, d);
      comm.recv(t, 0);
      std::vector<float> v = t.to_vector<float>();
      for (int64_t i = 0; i < 1000; ++i) MT_CHECK(v[i] == value(0, i), "recv i=", i);
    }
  });
}

TEST(NcclCommunicatorCuda, RejectsCpuTensors) {
  SKIP_UNLESS_GPUS(1);
  auto comms = make_nccl_communicators({Device::cuda(0)});
  Tensor t = Tensor::zeros({4});
  EXPECT_THROW(comms[0]->native_all_reduce(t, ReduceOp::Sum), DeviceError);
}

// Rank 1 never joins: rank 0 gets CommError within the timeout, its communicator aborted.
TEST(NcclCommunicatorCuda, MissingRankTimesOutAndAborts) {
  SKIP_UNLESS_GPUS(2);
  CommOptions options;
  options.timeout = std::chrono::milliseconds(500);
  auto comms = make_nccl_communicators(gpus(2), options);
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    if (comm.rank() == 1) return;
    Tensor t = rank_tensor(0, 1000, comm.device());
    comm.native_all_reduce(t, ReduceOp::Sum);
  });
  ASSERT_TRUE(errors[0]) << "all_reduce without rank 1 returned instead of timing out";
  try {
    std::rethrow_exception(errors[0]);
  } catch (const CommError& e) {
    EXPECT_NE(std::string(e.what()).find("all_reduce: rank 0"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(errors[1]);
  EXPECT_THROW(comms[0]->barrier(), CommError);  // aborted
}

}  // namespace
}  // namespace minitrain
