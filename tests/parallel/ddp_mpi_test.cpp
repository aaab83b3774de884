// DistributedDataParallel on the MPI backend, one rank per process (ctest runs it under mpirun
// -n 2 and -n 3 with tests/parallel/mpi_test_main.cpp). Every rank trains its rows and checks its
// own weights against the one-device run, which each process computes itself; the ranks must also
// agree bit for bit (checked with an all-reduce Max of the differences to rank 0's weights).
// Every collective of a DDP runs on its communication thread (Note [DDP communication thread]),
// which MPI_THREAD_SERIALIZED allows because the main thread makes no MPI call meanwhile.

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "parallel/comm/mpi_communicator.h"
#include "tests/parallel/ddp_test_util.h"

namespace minitrain {
namespace {

using namespace testing::ddp;

// A generous deadline: a rank that desynchronises fails the test instead of hanging it.
std::unique_ptr<MpiCommunicator> test_world(
    AllReduceAlgorithm algorithm = AllReduceAlgorithm::Native) {
  CommOptions o;
  o.timeout = std::chrono::seconds(20);
  o.all_reduce = algorithm;
  return MpiCommunicator::world(o);
}

// The largest |w - rank 0's w| over all ranks and weights (0 when the replicas are identical).
double max_diff_to_rank0(Communicator& comm, const Weights& w) {
  std::vector<double> flat;
  for (auto& [name, v] : w) flat.insert(flat.end(), v.begin(), v.end());
  Tensor t = Tensor::from_vector(flat, {static_cast<int64_t>(flat.size())});
  comm.broadcast(t, 0);
  const std::vector<double> r0 = t.to_vector<double>();
  double diff = 0;
  for (std::size_t i = 0; i < flat.size(); ++i) diff = std::max(diff, std::abs(flat[i] - r0[i]));
  Tensor d = Tensor::from_vector(std::vector<double>{diff}, {1});
  comm.all_reduce(d, ReduceOp::Max);
  return d.item();
}

void expect_matches_one_device(const Case& c,
                               AllReduceAlgorithm algorithm = AllReduceAlgorithm::Native) {
  auto comm = test_world(algorithm);
  const std::string what = "world " + std::to_string(comm->size()) + " rank " +
                           std::to_string(comm->rank()) + " " + c.str();
  const Weights got = train_ddp(*comm, c);
  expect_weights_close(got, train_one_device(c, comm->size()), what);
  EXPECT_EQ(max_diff_to_rank0(*comm, got), 0.0) << what << ": the replicas drifted apart";
}

TEST(DdpMpi, MatchesOneDeviceSgdMomentumAndAdam) {
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()})
    for (bool overlap : {true, false}) {
      Case c;
      c.opt = oc;
      c.ddp.overlap = overlap;
      c.ddp.bucket_bytes = 200;  // several buckets, one a lone parameter larger than the cap
      expect_matches_one_device(c);
    }
}

TEST(DdpMpi, NoSyncAccumulationMatchesTheCombinedBatch) {
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
    Case c;
    c.opt = oc;
    c.micro_batches = 2;
    expect_matches_one_device(c);
  }
}

TEST(DdpMpi, TinyAndHugeBucketsGiveTheSameWeights) {
  Case tiny, huge;
  tiny.ddp.bucket_bytes = 1;
  huge.ddp.bucket_bytes = int64_t(1) << 30;
  auto comm = test_world();
  const Weights a = train_ddp(*comm, tiny), b = train_ddp(*comm, huge);
  // MPI_Allreduce may reduce a long buffer in another order than a short one: rounding only.
  expect_weights_close(a, b, "tiny vs huge buckets");
  expect_weights_close(a, train_one_device(tiny, comm->size()), "tiny buckets");
}

TEST(DdpMpi, RingAllReduceMatchesOneDevice) {
  Case c;
  c.opt = adam();
  c.ddp.bucket_bytes = 200;
  expect_matches_one_device(c, AllReduceAlgorithm::Ring);
}

TEST(DdpMpi, ConstructionBroadcastsRankZerosParameters) {
  auto comm = test_world();
  const Weights rank0 = weights(*mlp(rank_seed(0)));
  if (comm->rank() > 0) {  // the seeds differ, so the broadcast must act
    EXPECT_NE(weights(*mlp(rank_seed(comm->rank()))), rank0);
  }
  DistributedDataParallel ddp(mlp(rank_seed(comm->rank())), *comm);
  EXPECT_EQ(weights(ddp), rank0) << "rank " << comm->rank();
}

TEST(DdpMpi, HybridReplicasOfTwoStagesMatchOneDevice) {
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
    Case c;
    c.opt = oc;
    c.model = two_stage_mlp();
    c.ddp.bucket_bytes = 200;
    expect_matches_one_device(c);
  }
}

}  // namespace
}  // namespace minitrain
