// The MPI backend against the values each rank should receive. Run by mpirun with 1, 2 and 3
// ranks (tests/parallel/CMakeLists.txt); every rank runs every test, so a test that needs a
// second rank skips on all ranks alike. Inputs are small integers: sums are exact in float32.

#include "parallel/comm/mpi_communicator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kernels/cast.h"
#include "parallel/comm/ring.h"

namespace minitrain {
namespace {

// empty, tiny, odd, prime-ish; 1000 and 3001 floats go in pieces (Note [small messages in pieces]).
const std::vector<int64_t> kLengths = {0, 1, 7, 1000, 3001, 65539};
// The native all-reduce's two schedules (Note [the MPI all-reduce]): 1000 floats go by recursive
// doubling, 65539 (256 KiB) around the ring; 3 Mi + 5 floats (12 MiB) make the ring's
// reduce-scatter send several 4 MiB slices per chunk on 2 ranks.
constexpr int64_t kRecursiveDoublingLength = 1000;
constexpr int64_t kRingLength = 65539;
constexpr int64_t kRingSlicesLength = 3 * (int64_t(1) << 20) + 5;

// Rank r's element i: a small integer in [-4, 4] that differs between ranks.
float value(int rank, int64_t i) { return static_cast<float>((i * 7 + rank * 3 + i / 5) % 9 - 4); }

Tensor rank_tensor(int rank, int64_t n, int64_t offset = 0) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = value(rank, offset + i);
  return Tensor::from_vector(v, {n});
}

CommOptions options_with_timeout(std::chrono::milliseconds timeout) {
  CommOptions o;
  o.timeout = timeout;
  return o;
}

// A generous deadline: a test that desynchronises the ranks fails instead of hanging.
std::unique_ptr<MpiCommunicator> test_world() {
  return MpiCommunicator::world(options_with_timeout(std::chrono::seconds(20)));
}

TEST(MpiCommunicator, ReportsRankSizeBackend) {
  auto comm = test_world();
  int size = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  EXPECT_EQ(comm->size(), size);
  EXPECT_EQ(comm->rank(), rank);
  EXPECT_EQ(comm->backend(), "mpi");
  EXPECT_TRUE(comm->device().is_cpu());
  EXPECT_GE(MpiRuntime::instance().thread_level(), MPI_THREAD_SERIALIZED);
}

TEST(MpiCommunicator, AllReduceSumMaxAvgAreExact) {
  auto comm = test_world();
  const int n_ranks = comm->size();
  for (int64_t n : kLengths) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      Tensor t = rank_tensor(comm->rank(), n);
      comm->native_all_reduce(t, op);
      std::vector<float> got = t.to_vector<float>();
      ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        float sum = 0.f, max = value(0, i);
        for (int r = 0; r < n_ranks; ++r) {
          sum += value(r, i);
          max = std::max(max, value(r, i));
        }
        // Avg = Sum / size: exact up to the one rounding of the division.
        const float want = op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? max : sum / n_ranks;
        ASSERT_NEAR(got[i], want, op == ReduceOp::Avg ? 1e-6 : 0.0)
            << reduce_op_name(op) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(MpiCommunicator, AllReduceOverSeveralRingSlicesIsExact) {
  auto comm = test_world();
  Tensor t = rank_tensor(comm->rank(), kRingSlicesLength);
  comm->native_all_reduce(t, ReduceOp::Sum);
  const std::vector<float> got = t.to_vector<float>();
  for (int64_t i = 0; i < kRingSlicesLength; ++i) {
    float sum = 0.f;
    for (int r = 0; r < comm->size(); ++r) sum += value(r, i);
    ASSERT_EQ(got[i], sum) << "i=" << i;
  }
}

// DDP keeps the replicas equal only if every rank gets the very same averaged gradient: with
// values whose sums round, every rank must still end with rank 0's bits, on both schedules.
TEST(MpiCommunicator, EveryRankEndsWithBitIdenticalSums) {
  auto comm = test_world();
  for (int64_t n : {kRecursiveDoublingLength, kRingLength}) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      v[i] = static_cast<float>(std::sin(0.37 * double(i) + 1.3 * comm->rank()) / 3.0);
    Tensor t = Tensor::from_vector(v, {n});
    comm->native_all_reduce(t, ReduceOp::Avg);
    Tensor root = t.clone();
    comm->broadcast(root, 0);
    const std::vector<float> mine = t.to_vector<float>(), rank0 = root.to_vector<float>();
    ASSERT_EQ(std::memcmp(mine.data(), rank0.data(), mine.size() * sizeof(float)), 0)
        << "n=" << n << ": rank " << comm->rank() << " differs from rank 0";
  }
}

// The 16-bit types go through MPI_Reduce_local with minitrain's own MPI_Ops (bfloat16 has 8
// significant bits: sums of at most 8 small integers stay exact).
TEST(MpiCommunicator, AllReduceOfBFloat16IsExactOnBothSchedules) {
  auto comm = test_world();
  for (int64_t n : {kRecursiveDoublingLength, kRingLength * 2}) {
    Tensor t = cast(rank_tensor(comm->rank(), n), DType::BFloat16);
    comm->native_all_reduce(t, ReduceOp::Sum);
    const std::vector<float> got = cast(t, DType::Float32).to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.f;
      for (int r = 0; r < comm->size(); ++r) sum += value(r, i);
      ASSERT_EQ(got[i], sum) << "n=" << n << " i=" << i;
    }
  }
}

// A rank that comes late, but within the deadline, past the spinning and yielding phases of the
// wait (Note [polling MPI requests]: sleeps from 2 ms): the all-reduce still completes, exactly.
TEST(MpiCommunicator, LateRankWithinTheDeadlineStillGetsTheSums) {
  auto comm = test_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  for (int64_t n : {kRecursiveDoublingLength, kRingLength}) {
    Tensor t = rank_tensor(comm->rank(), n);
    if (comm->rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    comm->native_all_reduce(t, ReduceOp::Sum);
    const std::vector<float> got = t.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float sum = 0.f;
      for (int r = 0; r < comm->size(); ++r) sum += value(r, i);
      ASSERT_EQ(got[i], sum) << "n=" << n << " i=" << i;
    }
  }
}

TEST(MpiCommunicator, AllReduceFloat64) {
  auto comm = test_world();
  Tensor t = Tensor::from_vector(std::vector<double>{1.5, -2.0, 1e300}, {3});
  comm->native_all_reduce(t, ReduceOp::Max);
  EXPECT_EQ(t.to_vector<double>(), (std::vector<double>{1.5, -2.0, 1e300}));
}

TEST(MpiCommunicator, BroadcastCopiesTheRootsTensor) {
  auto comm = test_world();
  const int root = comm->size() - 1;
  for (int64_t n : kLengths) {
    Tensor t = rank_tensor(comm->rank(), n);
    comm->broadcast(t, root);
    std::vector<float> got = t.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], value(root, i)) << "n=" << n << " i=" << i;
  }
}

TEST(MpiCommunicator, ReduceScatterGivesEachRankItsSummedChunk) {
  auto comm = test_world();
  const int size = comm->size(), rank = comm->rank();
  for (int64_t n : kLengths) {
    Tensor in = rank_tensor(rank, n * size);
    Tensor out = Tensor::zeros({n});
    comm->reduce_scatter(out, in, ReduceOp::Sum);
    std::vector<float> got = out.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.f;
      for (int r = 0; r < size; ++r) want += value(r, rank * n + i);
      ASSERT_EQ(got[i], want) << "n=" << n << " i=" << i;
    }
  }
}

TEST(MpiCommunicator, AllGatherConcatenatesInRankOrder) {
  auto comm = test_world();
  const int size = comm->size();
  for (int64_t n : kLengths) {
    Tensor in = rank_tensor(comm->rank(), n);
    Tensor out = Tensor::zeros({n * size});
    comm->all_gather(out, in);
    std::vector<float> got = out.to_vector<float>();
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[r * n + i], value(r, i)) << "n=" << n << " r=" << r << " i=" << i;
  }
}

TEST(MpiCommunicator, SendRecvAroundTheRing) {
  auto comm = test_world();
  const int size = comm->size(), rank = comm->rank();
  const int next = (rank + 1) % size, prev = (rank + size - 1) % size;
  for (int64_t n : kLengths) {
    Tensor mine = rank_tensor(rank, n);
    Tensor got = Tensor::zeros({n});
    comm->send_recv(mine, next, got, prev);
    std::vector<float> v = got.to_vector<float>();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], value(prev, i)) << "n=" << n << " i=" << i;
  }
}

TEST(MpiCommunicator, SendThenRecvBetweenPairs) {
  auto comm = test_world();
  const int rank = comm->rank();
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  for (int64_t n : kLengths) {
    if (rank == 0) {
      comm->send(rank_tensor(0, n), 1);
      Tensor back = Tensor::zeros({n});
      comm->recv(back, 1);
      std::vector<float> v = back.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(v[i], value(1, i) + value(0, i));
    } else if (rank == 1) {
      Tensor t = Tensor::zeros({n});
      comm->recv(t, 0);
      std::vector<float> v = t.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(v[i], value(0, i));
        v[i] += value(1, i);
      }
      comm->send(Tensor::from_vector(v, {n}), 0);
    }
  }
  comm->barrier();
}

// minitrain's ring over MPI send_recv against MPI_Allreduce, directly and through all_reduce's
// dispatch on CommOptions::all_reduce. Small integers: every summation order is exact.
TEST(MpiCommunicator, RingAllReduceMatchesMpiAllreduce) {
  CommOptions ring_options = options_with_timeout(std::chrono::seconds(20));
  ring_options.all_reduce = AllReduceAlgorithm::Ring;
  auto comm = MpiCommunicator::world(ring_options);
  for (int64_t n : kLengths) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Avg}) {
      Tensor native = rank_tensor(comm->rank(), n);
      comm->native_all_reduce(native, op);
      Tensor ring = rank_tensor(comm->rank(), n);
      ring_all_reduce(*comm, ring, op);
      Tensor dispatched = rank_tensor(comm->rank(), n);
      comm->all_reduce(dispatched, op);
      std::vector<float> want = native.to_vector<float>();
      std::vector<float> got = ring.to_vector<float>();
      std::vector<float> got2 = dispatched.to_vector<float>();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_NEAR(got[i], want[i], op == ReduceOp::Avg ? 1e-6 : 0.0)
            << reduce_op_name(op) << " n=" << n << " i=" << i;
        ASSERT_EQ(got2[i], got[i]) << reduce_op_name(op) << " n=" << n << " i=" << i;
      }
    }
  }
}

TEST(MpiCommunicator, RejectsMismatchedShapesLocally) {
  auto comm = test_world();
  Tensor out = Tensor::zeros({3});
  Tensor in = Tensor::zeros({3 * comm->size() + 1});
  EXPECT_THROW(comm->reduce_scatter(out, in, ReduceOp::Sum), ShapeError);
  EXPECT_THROW(comm->all_gather(in, out), ShapeError);
  Tensor t = Tensor::zeros({1});
  EXPECT_THROW(comm->send(t, comm->size()), ValueError);
}

TEST(MpiCommunicator, ShortMessageIsAShapeError) {
  auto comm = test_world();
  if (comm->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  if (comm->rank() == 0) comm->send(Tensor::zeros({5}), 1);
  if (comm->rank() == 1) {
    Tensor t = Tensor::zeros({7});
    EXPECT_THROW(comm->recv(t, 0), ShapeError);
  }
  comm->barrier();
}

// Rank 1 never joins the all-reduce: every other rank gets CommError naming the op and itself
// within the timeout, and the communicator refuses further collectives; on both schedules of the
// native all-reduce (recursive doubling, the ring). The job then goes on.
TEST(MpiCommunicator, MissingRankInCollectiveTimesOut) {
  auto sync = test_world();
  if (sync->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  for (int64_t n : {kRecursiveDoublingLength, kRingLength}) {
    auto comm = std::make_unique<MpiCommunicator>(
        MPI_COMM_WORLD, options_with_timeout(std::chrono::milliseconds(300)));
    if (comm->rank() == 1) {
      // A rank that never comes (stopped, stuck, dead) never frees its communicator either. Freed
      // here, its context id could go to a later communicator of this rank, and the messages the
      // other ranks already sent it for the abandoned all-reduce would be matched there.
      (void)comm.release();
    } else {
      Tensor t = rank_tensor(comm->rank(), n);
      const auto start = std::chrono::steady_clock::now();
      std::string message;
      try {
        comm->native_all_reduce(t, ReduceOp::Sum);
      } catch (const CommError& e) {
        message = e.what();
      }
      const double waited =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      ASSERT_FALSE(message.empty())
          << "all_reduce of " << n << " floats without rank 1 returned instead of timing out";
      EXPECT_NE(message.find("all_reduce"), std::string::npos) << message;
      EXPECT_NE(message.find("rank " + std::to_string(comm->rank())), std::string::npos) << message;
      EXPECT_GE(waited, 0.29) << message;
      EXPECT_LT(waited, 10.0) << message;  // the deadline held (generous: oversubscribed CI cores)
      EXPECT_THROW(comm->barrier(), CommError);  // unusable after the abandoned collective
    }
    sync->barrier();  // everyone carries on together
  }
}

// A recv from a rank that never sends names the peer; the recv is cancelled and the
// communicator stays usable.
TEST(MpiCommunicator, MissingSenderTimesOutAndCommunicatorRecovers) {
  auto sync = test_world();
  if (sync->size() < 2) GTEST_SKIP() << "needs 2 ranks (run under mpirun -n 2 or more)";
  MpiCommunicator comm(MPI_COMM_WORLD, options_with_timeout(std::chrono::seconds(2)));
  if (comm.rank() == 0) {
    Tensor t = Tensor::zeros({7});
    std::string message;
    try {
      comm.recv(t, 1);
    } catch (const CommError& e) {
      message = e.what();
    }
    ASSERT_FALSE(message.empty()) << "recv from a silent rank returned";
    EXPECT_NE(message.find("recv: rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find("for rank 1"), std::string::npos) << message;
  }
  sync->barrier();  // rank 0 is back from its timeout
  // Still in step: the same communicator carries a collective and a send/recv.
  Tensor one = Tensor::from_vector(std::vector<float>{1.f}, {1});
  comm.native_all_reduce(one, ReduceOp::Sum);
  EXPECT_EQ(one.item(), comm.size());
  if (comm.rank() == 1) comm.send(rank_tensor(1, 7), 0);
  if (comm.rank() == 0) {
    Tensor t = Tensor::zeros({7});
    comm.recv(t, 1);
    EXPECT_EQ(t.to_vector<float>(), rank_tensor(1, 7).to_vector<float>());
  }
}

// ---- GPU tensors, staged through pinned host memory (Note [staging CUDA tensors through MPI])
// ---- Named *Cuda*: their own ctest entries, labelled gpu (tests/parallel/CMakeLists.txt). Each
// rank takes its own GPU while there are enough (the emulator gives each process 2), else they
// wrap.

Device rank_gpu(int rank) { return Device::cuda(rank % cuda_device_count()); }

std::unique_ptr<MpiCommunicator> cuda_world(
    AllReduceAlgorithm algorithm = AllReduceAlgorithm::Native) {
  int rank = 0;
  MpiRuntime::instance();
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CommOptions o = options_with_timeout(std::chrono::seconds(20));
  o.all_reduce = algorithm;
  return MpiCommunicator::world(o, rank_gpu(rank));
}

TEST(MpiCommunicatorCuda, AllReduceSumAvgMaxOfGpuTensorsAreTheSums) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  for (AllReduceAlgorithm algorithm : {AllReduceAlgorithm::Native, AllReduceAlgorithm::Ring}) {
    auto comm = cuda_world(algorithm);
    ASSERT_TRUE(comm->device().is_cuda());
    const int n_ranks = comm->size();
    for (int64_t n : kLengths) {
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        Tensor t = rank_tensor(comm->rank(), n).to(comm->device());
        comm->all_reduce(t, op);
        ASSERT_EQ(t.device(), comm->device());
        std::vector<float> got = t.to(Device::cpu()).to_vector<float>();
        ASSERT_EQ(got.size(), static_cast<std::size_t>(n));
        bool nonzero = n == 0;
        for (int64_t i = 0; i < n; ++i) {
          float sum = 0.f, max = value(0, i);
          for (int r = 0; r < n_ranks; ++r) {
            sum += value(r, i);
            max = std::max(max, value(r, i));
          }
          const float want = op == ReduceOp::Sum ? sum : op == ReduceOp::Max ? max : sum / n_ranks;
          ASSERT_NEAR(got[i], want, op == ReduceOp::Avg ? 1e-6 : 0.0)
              << reduce_op_name(op) << " n=" << n << " i=" << i;
          nonzero = nonzero || got[i] != 0.f;
        }
        EXPECT_TRUE(nonzero) << "all zeros: n=" << n;
      }
    }
  }
}

TEST(MpiCommunicatorCuda, BroadcastOfAGpuTensorCopiesTheRootsTensor) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto comm = cuda_world();
  for (int root = 0; root < comm->size(); ++root) {
    for (int64_t n : kLengths) {
      Tensor t = rank_tensor(comm->rank(), n).to(comm->device());
      comm->broadcast(t, root);
      std::vector<float> got = t.to(Device::cpu()).to_vector<float>();
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], value(root, i)) << "root=" << root << " n=" << n << " i=" << i;
    }
  }
}

TEST(MpiCommunicatorCuda, ReduceScatterAllGatherAndSendRecvOfGpuTensors) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto comm = cuda_world();
  const int size = comm->size(), rank = comm->rank();
  const Device gpu = comm->device();
  for (int64_t n : kLengths) {
    Tensor in = rank_tensor(rank, n * size).to(gpu);
    Tensor out = Tensor::zeros({n}, DType::Float32, gpu);
    comm->reduce_scatter(out, in, ReduceOp::Sum);
    std::vector<float> got = out.to(Device::cpu()).to_vector<float>();
    for (int64_t i = 0; i < n; ++i) {
      float want = 0.f;
      for (int r = 0; r < size; ++r) want += value(r, rank * n + i);
      ASSERT_EQ(got[i], want) << "reduce_scatter n=" << n << " i=" << i;
    }
    Tensor mine = rank_tensor(rank, n).to(gpu);
    Tensor all = Tensor::zeros({n * size}, DType::Float32, gpu);
    comm->all_gather(all, mine);
    got = all.to(Device::cpu()).to_vector<float>();
    for (int r = 0; r < size; ++r)
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[r * n + i], value(r, i)) << "all_gather n=" << n << " r=" << r;
    Tensor from_prev = Tensor::zeros({n}, DType::Float32, gpu);
    comm->send_recv(mine, (rank + 1) % size, from_prev, (rank + size - 1) % size);
    got = from_prev.to(Device::cpu()).to_vector<float>();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got[i], value((rank + size - 1) % size, i)) << "send_recv n=" << n << " i=" << i;
  }
  comm->barrier();
}

TEST(MpiCommunicatorCuda, ATensorOnAnotherDeviceIsADeviceErrorNamingBoth) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device";
  auto comm = cuda_world();
  Tensor on_cpu = Tensor::zeros({3});
  try {
    comm->all_reduce(on_cpu);
    FAIL() << "a CPU tensor on a GPU communicator was accepted";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("is on cpu"), std::string::npos) << msg;
    EXPECT_NE(msg.find(comm->device().str()), std::string::npos) << msg;
  }
  auto cpu_comm = test_world();
  Tensor on_gpu = Tensor::zeros({3}, DType::Float32, comm->device());
  try {
    cpu_comm->broadcast(on_gpu, 0);
    FAIL() << "a GPU tensor on a CPU communicator was accepted";
  } catch (const DeviceError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("is on " + comm->device().str()), std::string::npos) << msg;
    EXPECT_NE(msg.find("on cpu"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace minitrain
