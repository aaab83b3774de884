// The threads backend against the values each rank should receive: every collective for 1..8
// ranks and awkward lengths, on small integers so that float32 results are exact; timeouts and
// disagreeing ranks turn into errors, never hangs.

#include "parallel/comm/thread_communicator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>

#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_values;
using testing::rank_tensor;
using testing::rank_value;
using testing::run_cpu_ranks;

/// 0, 1, 7, n-1, 1000, 2^16 + 3: empty, fewer elements than ranks, not divisible, large.
std::vector<int64_t> lengths_for(int n) { return {0, 1, 7, n - 1, 1000, (1 << 16) + 3}; }

CommOptions native_options() {
  CommOptions o;
  o.timeout = std::chrono::seconds(30);
  o.all_reduce = AllReduceAlgorithm::Native;
  return o;
}

/// What op over ranks 0..n-1 gives for element i, rounded as the kernels round (sum exact;
/// avg = sum * (1/n) in the tensor's type).
double expected_reduce(ReduceOp op, int n, int64_t i, DType dtype) {
  double sum = 0, max = rank_value(0, i);
  for (int r = 0; r < n; ++r) {
    sum += rank_value(r, i);
    max = std::max(max, rank_value(r, i));
  }
  if (op == ReduceOp::Sum) return sum;
  if (op == ReduceOp::Max) return max;
  if (dtype == DType::Float32) return static_cast<float>(sum) * static_cast<float>(1.0 / n);
  return sum * (1.0 / n);
}

TEST(ThreadCommunicator, ReportsRankSizeDeviceAndBackend) {
  auto comms = make_thread_communicators({Device::cpu(), Device::cpu(), Device::cpu()});
  ASSERT_EQ(comms.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(comms[r]->rank(), r);
    EXPECT_EQ(comms[r]->size(), 3);
    EXPECT_EQ(comms[r]->device(), Device::cpu());
    EXPECT_EQ(comms[r]->backend(), "threads");
  }
}

TEST(ReduceOpNames, ParseAndNameRoundTrip) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
    EXPECT_EQ(parse_reduce_op(reduce_op_name(op)), op);
  EXPECT_THAT(testing::error_message([] { parse_reduce_op("mean"); }),
              HasSubstr("unknown reduce op 'mean'"));
}

TEST(ThreadCommunicator, NativeAllReduceIsExactForEveryOpRankCountAndLength) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : lengths_for(n))
      for (DType dtype : {DType::Float32, DType::Float64})
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
          run_cpu_ranks(n, native_options(), [&](Communicator& comm) {
            Tensor t = rank_tensor(comm.rank(), len, dtype);
            comm.all_reduce(t, op);
            const std::vector<double> got = host_values(t);
            for (int64_t i = 0; i < len; ++i)
              ASSERT_EQ(got[i], expected_reduce(op, n, i, dtype))
                  << reduce_op_name(op) << " n=" << n << " len=" << len << " rank " << comm.rank()
                  << " i=" << i;
          });
}

TEST(ThreadCommunicator, BroadcastFromEveryRoot) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : lengths_for(n))
      for (int root = 0; root < n; ++root)
        run_cpu_ranks(n, native_options(), [&](Communicator& comm) {
          Tensor t = rank_tensor(comm.rank(), len, DType::Float32);
          comm.broadcast(t, root);
          const std::vector<double> got = host_values(t);
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(got[i], rank_value(root, i)) << "n=" << n << " root " << root;
        });
}

TEST(ThreadCommunicator, ReduceScatterGivesEachRankItsChunk) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000)})
      for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max})
        run_cpu_ranks(n, native_options(), [&](Communicator& comm) {
          const Tensor in = rank_tensor(comm.rank(), n * len, DType::Float32);
          Tensor out = Tensor::empty({len});
          comm.reduce_scatter(out, in, op);
          const std::vector<double> got = host_values(out);
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(got[i], expected_reduce(op, n, comm.rank() * len + i, DType::Float32))
                << reduce_op_name(op) << " n=" << n << " len=" << len;
        });
}

TEST(ThreadCommunicator, AllGatherConcatenatesInRankOrder) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : {int64_t(0), int64_t(1), int64_t(7), int64_t(1000)})
      run_cpu_ranks(n, native_options(), [&](Communicator& comm) {
        const Tensor in = rank_tensor(comm.rank(), len, DType::Float64);
        Tensor out = Tensor::empty({n, len}, DType::Float64);
        comm.all_gather(out, in);
        const std::vector<double> got = host_values(out);
        for (int r = 0; r < n; ++r)
          for (int64_t i = 0; i < len; ++i)
            ASSERT_EQ(got[r * len + i], rank_value(r, i)) << "n=" << n << " chunk " << r;
      });
}

TEST(ThreadCommunicator, SendRecvPassesAroundTheRing) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : lengths_for(n))
      run_cpu_ranks(n, native_options(), [&](Communicator& comm) {
        const int next = (comm.rank() + 1) % n, prev = (comm.rank() + n - 1) % n;
        const Tensor mine = rank_tensor(comm.rank(), len, DType::Float32);
        Tensor got = Tensor::zeros({len});
        comm.send_recv(mine, next, got, prev);
        // Then plain send/recv the other way round, twice in a row: FIFO order per pair.
        Tensor back1 = Tensor::zeros({len}), back2 = Tensor::zeros({len});
        comm.send(mine, prev);
        comm.send(got, prev);
        comm.recv(back1, next);
        comm.recv(back2, next);
        comm.barrier();
        const std::vector<double> g = host_values(got), b1 = host_values(back1),
                                  b2 = host_values(back2);
        for (int64_t i = 0; i < len; ++i) {
          ASSERT_EQ(g[i], rank_value(prev, i));
          ASSERT_EQ(b1[i], rank_value(next, i));
          ASSERT_EQ(b2[i], rank_value(comm.rank(), i));  // next received ours and sent it back
        }
      });
}

// ---- failures: errors, never hangs ----

CommOptions short_timeout(AllReduceAlgorithm algorithm = AllReduceAlgorithm::Native) {
  CommOptions o;
  o.timeout = std::chrono::milliseconds(200);
  o.all_reduce = algorithm;
  return o;
}

std::string what_of(const std::exception_ptr& e) {
  try {
    if (e) std::rethrow_exception(e);
  } catch (const CommError& c) {
    return c.what();
  } catch (const std::exception& x) {
    return std::string("(not a CommError) ") + x.what();
  }
  return "(no exception)";
}

TEST(ThreadCommunicatorTimeout, RankThatNeverComesGivesCommErrorThenTheGroupFailsFast) {
  auto comms = make_thread_communicators(std::vector<Device>(3, Device::cpu()), short_timeout());
  const auto start = std::chrono::steady_clock::now();
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    if (comm.rank() == 2) return;  // rank 2 never joins
    Tensor t = rank_tensor(comm.rank(), 16, DType::Float32);
    comm.all_reduce(t, ReduceOp::Sum);
  });
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0);  // a bound on the hang, not a timing assertion
  EXPECT_FALSE(errors[2]);
  for (int r = 0; r < 2; ++r) {
    const std::string msg = what_of(errors[r]);
    EXPECT_THAT(msg, HasSubstr("all_reduce")) << msg;
    EXPECT_THAT(msg, HasSubstr("waited 0.2 s for rank 2")) << msg;
  }
  // One of them timed out first and names itself; the other names the broken group.
  const std::string both = what_of(errors[0]) + what_of(errors[1]);
  EXPECT_TRUE(both.find("all_reduce: rank 0 waited") != std::string::npos ||
              both.find("all_reduce: rank 1 waited") != std::string::npos)
      << both;

  // Every later call on the group, by any rank, fails at once.
  const auto later = std::chrono::steady_clock::now();
  errors = testing::run_ranks_collect(comms, [](Communicator& comm) { comm.barrier(); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - later).count(), 0.15);
  for (int r = 0; r < 3; ++r) EXPECT_THAT(what_of(errors[r]), HasSubstr("the group is broken"));
}

TEST(ThreadCommunicatorTimeout, RecvWithoutSenderGivesCommError) {
  auto comms = make_thread_communicators(std::vector<Device>(2, Device::cpu()), short_timeout());
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    if (comm.rank() == 0) return;
    Tensor t = Tensor::empty({4});
    comm.recv(t, 0);
  });
  EXPECT_THAT(what_of(errors[1]), HasSubstr("recv: rank 1 waited 0.2 s for rank 0"));
}

TEST(ThreadCommunicatorMismatch, ShapeOrDTypeDisagreementIsAnErrorNotAHang) {
  for (bool dtype_differs : {false, true}) {
    CommOptions o = short_timeout();
    o.timeout = std::chrono::seconds(20);  // a mismatch must be found long before this
    auto comms = make_thread_communicators(std::vector<Device>(3, Device::cpu()), o);
    const auto start = std::chrono::steady_clock::now();
    auto errors = testing::run_ranks_collect(comms, [&](Communicator& comm) {
      const bool odd = comm.rank() == 1;
      Tensor t = rank_tensor(comm.rank(), odd && !dtype_differs ? 8 : 7,
                             odd && dtype_differs ? DType::Float64 : DType::Float32);
      comm.all_reduce(t, ReduceOp::Sum);
    });
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
    for (int r = 0; r < 3; ++r) {
      const std::string msg = what_of(errors[r]);
      EXPECT_THAT(msg, HasSubstr("all_reduce")) << msg;
      EXPECT_THAT(msg, HasSubstr(dtype_differs ? "float64 [7]" : "float32 [8]")) << msg;
    }
  }
}

TEST(ThreadCommunicatorMismatch, DifferentCollectivesAreAnError) {
  auto comms = make_thread_communicators(std::vector<Device>(2, Device::cpu()), short_timeout());
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    Tensor t = rank_tensor(comm.rank(), 5, DType::Float32);
    if (comm.rank() == 0)
      comm.all_reduce(t, ReduceOp::Sum);
    else
      comm.broadcast(t, 0);
  });
  for (int r = 0; r < 2; ++r) EXPECT_THAT(what_of(errors[r]), HasSubstr("broadcast(root 0)"));
}

// ---- GPUs of one process (label gpu) ----

TEST(ThreadCommunicatorCuda, TwoRanksOnTwoGpusAllReduceAndBroadcast) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  for (AllReduceAlgorithm algorithm : {AllReduceAlgorithm::Native, AllReduceAlgorithm::Ring}) {
    CommOptions o = native_options();
    o.all_reduce = algorithm;
    auto comms = make_thread_communicators({Device::cuda(0), Device::cuda(1)}, o);
    testing::run_ranks(comms, [&](Communicator& comm) {
      const int64_t len = (1 << 16) + 3;
      Tensor t = rank_tensor(comm.rank(), len, DType::Float32, comm.device());
      comm.all_reduce(t, ReduceOp::Sum);
      Tensor b = rank_tensor(comm.rank(), len, DType::Float32, comm.device());
      comm.broadcast(b, 1);
      const std::vector<double> got = host_values(t), got_b = host_values(b);
      for (int64_t i = 0; i < len; ++i) {
        ASSERT_EQ(got[i], expected_reduce(ReduceOp::Sum, 2, i, DType::Float32));
        ASSERT_EQ(got_b[i], rank_value(1, i));
      }
    });
  }
}

}  // namespace
}  // namespace minitrain
