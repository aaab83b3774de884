// The ring all-reduce against the values each rank should receive and against the threads
// backend's native all-reduce: bit for bit on integers, within rounding on random floats.

#include "parallel/comm/ring.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using ::testing::HasSubstr;
using testing::host_values;
using testing::rank_tensor;
using testing::rank_value;
using testing::run_cpu_ranks;

CommOptions options_for(AllReduceAlgorithm algorithm) {
  CommOptions o;
  o.timeout = std::chrono::seconds(30);
  o.all_reduce = algorithm;
  return o;
}

/// Each rank's result of comm.all_reduce on `make(rank)`, gathered as host values by rank.
std::vector<std::vector<double>> all_reduce_results(int n, AllReduceAlgorithm algorithm,
                                                    ReduceOp op,
                                                    const std::function<Tensor(int)>& make) {
  std::vector<std::vector<double>> results(n);
  run_cpu_ranks(n, options_for(algorithm), [&](Communicator& comm) {
    Tensor t = make(comm.rank());
    comm.all_reduce(t, op);
    results[comm.rank()] = host_values(t);
  });
  return results;
}

TEST(RingAllReduce, IsExactForEveryOpRankCountAndAwkwardLength) {
  for (int n = 1; n <= 8; ++n)
    for (int64_t len : {int64_t(0), int64_t(1), int64_t(7), int64_t(n - 1), int64_t(1000),
                        int64_t((1 << 16) + 3)})
      for (DType dtype : {DType::Float32, DType::Float64})
        for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
          const auto got = all_reduce_results(n, AllReduceAlgorithm::Ring, op,
                                              [&](int r) { return rank_tensor(r, len, dtype); });
          for (int r = 0; r < n; ++r)
            for (int64_t i = 0; i < len; ++i) {
              double sum = 0, max = rank_value(0, i);
              for (int q = 0; q < n; ++q) {
                sum += rank_value(q, i);
                max = std::max(max, rank_value(q, i));
              }
              double want = op == ReduceOp::Max ? max : sum;
              if (op == ReduceOp::Avg)
                want = dtype == DType::Float32
                           ? static_cast<float>(sum) * static_cast<float>(1.0 / n)
                           : sum * (1.0 / n);
              ASSERT_EQ(got[r][i], want) << reduce_op_name(op) << " n=" << n << " len=" << len
                                         << " rank " << r << " i=" << i;
            }
        }
}

TEST(RingAllReduce, EqualsNativeBitForBitOnIntegers) {
  for (int n : {2, 3, 5, 8})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      auto make = [](int r) { return rank_tensor(r, 100003, DType::Float32); };
      const auto ring = all_reduce_results(n, AllReduceAlgorithm::Ring, op, make);
      const auto native = all_reduce_results(n, AllReduceAlgorithm::Native, op, make);
      ASSERT_GT(testing::host_max_abs(Tensor::from_vector(ring[0], {int64_t(ring[0].size())})), 0);
      for (int r = 0; r < n; ++r) ASSERT_EQ(ring[r], native[r]) << reduce_op_name(op) << " n=" << n;
    }
}

TEST(RingAllReduce, EqualsNativeWithinRoundingOnRandomFloats) {
  for (int n : {2, 3, 4, 7})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      auto make = [](int r) { return testing::random_tensor({40000}, 100 + r); };
      const auto ring = all_reduce_results(n, AllReduceAlgorithm::Ring, op, make);
      const auto native = all_reduce_results(n, AllReduceAlgorithm::Native, op, make);
      // The ring adds each chunk in another order than native's rank order: n-1 roundings of
      // sums of n values in [-1, 1], so |error| <= (n-1) * n * 2^-24 absolutely.
      const double atol = (n - 1) * n * std::ldexp(1.0, -24);
      for (int r = 0; r < n; ++r)
        EXPECT_ALLCLOSE(ring[r], native[r], op == ReduceOp::Max ? 0.0 : atol, 0.0)
            << reduce_op_name(op) << " n=" << n;
      // Ranks agree with each other exactly: chunk owners' results are copied, not recomputed.
      for (int r = 1; r < n; ++r) EXPECT_EQ(ring[r], ring[0]);
    }
}

TEST(RingAllReduce, TimeoutNamesTheRingStepAndThePeer) {
  CommOptions o = options_for(AllReduceAlgorithm::Ring);
  o.timeout = std::chrono::milliseconds(200);
  auto comms = make_thread_communicators(std::vector<Device>(4, Device::cpu()), o);
  const auto start = std::chrono::steady_clock::now();
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    if (comm.rank() == 3) return;  // rank 3 never joins
    Tensor t = rank_tensor(comm.rank(), 1000, DType::Float32);
    comm.all_reduce(t, ReduceOp::Sum);
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  // Rank 0 receives from rank 3 in the first step. Which rank's deadline passes first is a race
  // (rank 1 waits on rank 0 in step 1), so rank 0 either timed out itself or saw the broken group.
  const std::string msg = testing::error_message([&] { std::rethrow_exception(errors[0]); });
  EXPECT_THAT(msg, HasSubstr("all_reduce (ring reduce-scatter step 0, slice 0): recv: rank 0"));
  EXPECT_THAT(msg, HasSubstr("for rank 3"));
  EXPECT_THAT(msg, HasSubstr("waited 0.2 s for rank"));
  for (int r = 1; r < 3; ++r) EXPECT_TRUE(errors[r]) << "rank " << r << " did not fail";
}

TEST(RingAllReduce, LengthMismatchIsAnErrorNotAHang) {
  CommOptions o = options_for(AllReduceAlgorithm::Ring);
  o.timeout = std::chrono::seconds(20);
  auto comms = make_thread_communicators(std::vector<Device>(3, Device::cpu()), o);
  const auto start = std::chrono::steady_clock::now();
  auto errors = testing::run_ranks_collect(comms, [](Communicator& comm) {
    Tensor t = rank_tensor(comm.rank(), comm.rank() == 1 ? 1001 : 1000, DType::Float32);
    comm.all_reduce(t, ReduceOp::Sum);
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  for (int r = 0; r < 3; ++r) ASSERT_TRUE(errors[r]) << "rank " << r << " did not fail";
  EXPECT_THAT(testing::error_message([&] { std::rethrow_exception(errors[0]); }),
              HasSubstr("a send must be matched by a recv of the same shape"));
}

}  // namespace
}  // namespace minitrain
