// The parallel modes' ReplicaSync classes (train/replica_sync.h) driving a real Trainer, each rank
// a thread with its own communicator (the threads backend): DdpSync's ranks end with one device's
// weights on the global batch, count every rank's rows and leave the checkpoint to rank 0;
// LocalSgdSync's ranks part between sync points and meet at them, agree on skipping an overflowed
// step, and after_run catches ranks that differ; DataParallelSync hands a resumed checkpoint to
// every replica. tests/train/ddp_hooks_test.cpp checks when the Trainer calls what.

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/readers.h"
#include "data/sampler.h"
#include "kernels/elementwise.h"
#include "nn/mlp.h"
#include "optim/make_optimizer.h"
#include "parallel/data_parallel.h"
#include "tests/core/io_test_util.h"
#include "tests/parallel/run_ranks.h"
#include "tests/support/test_util.h"
#include "train/data_parallel_sync.h"
#include "train/ddp_sync.h"
#include "train/local_sgd_sync.h"
#include "train/trainer.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

constexpr int64_t kRows = 48;  // batches of 4 per rank and 8 on one device divide it

std::shared_ptr<TensorDataset> rows() {
  return std::make_shared<TensorDataset>(make_synthetic_regression(kRows, 3, 1, /*seed=*/2));
}

std::unique_ptr<Sequential> model() {
  Generator gen(5);
  return make_mlp({3, 8, 1}, Activation::Tanh, gen);
}

OptimizerConfig optimizer(const char* name) {
  OptimizerConfig oc;
  oc.name = name;
  oc.lr = name == std::string("adam") ? 0.01 : 0.05;
  return oc;
}

// `batch` rows per batch in file order; with `world` > 1, this rank's share (strided).
std::unique_ptr<DataLoader> loader(int64_t batch, int world = 1, int rank = 0) {
  DataLoaderOptions lo;
  lo.batch_size = batch;
  lo.shuffle = false;
  lo.prefetch = 0;
  if (world > 1) lo.sampler = std::make_shared<DistributedSampler>(kRows, world, rank, false);
  return std::make_unique<DataLoader>(rows(), lo);
}

using Weights = std::vector<std::vector<float>>;

Weights weights(Module& m) {
  Weights out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(p->value.to_vector<float>());
  return out;
}

double checksum(Module& m) {
  double sum = 0;
  for (const auto& w : weights(m))
    for (float v : w) sum += v;
  return sum;
}

void expect_close(const Weights& got, const Weights& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (std::size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (std::size_t j = 0; j < got[i].size(); ++j)
      EXPECT_NEAR(got[i][j], want[i][j], tol) << "tensor " << i << " [" << j << "]";
  }
}

// 2 ranks x batch 4 under DdpSync, grad_accum 2: one device on batch 8 with grad_accum 2 (float32
// summation order apart), the same weights on both ranks, samples of both ranks counted, the step
// losses the global batch's, and one checkpoint file, rank 0's.
TEST(DdpSyncThreads, RanksTrainOneDevicesWeightsOnTheGlobalBatch) {
  constexpr int64_t kSteps = 4;
  auto one_model = model();
  auto one_opt = make_optimizer(optimizer("sgd"), one_model->named_parameters());
  auto one_loader = loader(8);
  TrainerOptions o;
  o.total_steps = kSteps;
  o.grad_accum = 2;
  std::vector<double> one_losses;
  o.on_step = [&](const StepStats& s) { one_losses.push_back(s.loss); };
  const TrainSummary one = Trainer(*one_model, *one_opt, *one_loader, o).run();

  ScratchDir dir;
  std::vector<Weights> got(2);
  std::vector<TrainSummary> summaries(2);
  std::vector<std::vector<double>> losses(2);
  testing::run_cpu_ranks(2, {}, [&](Communicator& comm) {
    const int r = comm.rank();
    DistributedDataParallel ddp(model(), comm);
    auto opt = make_optimizer(optimizer("sgd"), ddp.named_parameters());
    auto data = loader(4, 2, r);
    DdpSync sync(ddp);
    TrainerOptions to = o;
    to.on_step = [&](const StepStats& s) { losses[r].push_back(s.loss); };
    to.replica_sync = &sync;
    to.checkpoint_dir = dir.path("ckpt");
    if (r == 0) std::filesystem::create_directories(to.checkpoint_dir);
    comm.barrier();
    summaries[r] = Trainer(ddp, *opt, *data, to).run();
    got[r] = weights(ddp);
  });
  const Weights want = weights(*one_model);
  ASSERT_NE(want, weights(*model())) << "trained";
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    // SGD over 4 steps; the gradients' sums differ in order only.
    expect_close(got[r], want, 1e-6);
    EXPECT_EQ(got[r], got[0]) << "every rank holds the same weights";
    EXPECT_EQ(summaries[r].samples, one.samples);
    ASSERT_EQ(losses[r].size(), one_losses.size());
    for (std::size_t i = 0; i < one_losses.size(); ++i)
      EXPECT_NEAR(losses[r][i], one_losses[i], 1e-6 * one_losses[i]);
  }
  EXPECT_EQ(summaries[0].last_checkpoint, checkpoint_path(dir.path("ckpt")));
  EXPECT_TRUE(std::filesystem::exists(summaries[0].last_checkpoint));
  EXPECT_EQ(std::filesystem::directory_iterator(dir.path("ckpt"))->path().filename(),
            std::filesystem::path(summaries[0].last_checkpoint).filename())
      << "one file: rank 1 writes none";
}

// --sync-every 3 over 7 steps with Adam: the ranks' models part after steps 1-2 and 4-5 (each
// rank its own rows) and are one model after 3, 6 and the last, 7; after_run then passes. A rank
// whose parameters moved afterwards makes after_run an Error on every rank.
TEST(LocalSgdSyncThreads, RanksPartBetweenSyncPointsAndMeetAtThem) {
  std::vector<std::map<int64_t, double>> sums(2);
  std::vector<std::string> errors(2);
  testing::run_cpu_ranks(2, {}, [&](Communicator& comm) {
    const int r = comm.rank();
    DistributedDataParallel ddp(model(), comm);
    auto opt = make_optimizer(optimizer("adam"), ddp.named_parameters());
    auto data = loader(4, 2, r);
    LocalSgdSync sync(ddp, *opt, 3, /*moments=*/false);
    TrainerOptions to;
    to.total_steps = 7;
    to.replica_sync = &sync;
    to.on_step = [&](const StepStats& s) { sums[r][s.step] = checksum(ddp); };
    Trainer(ddp, *opt, *data, to).run();
    sync.after_run();
    if (r == 1) {
      Tensor& w = ddp.named_parameters().front().second->value;
      scale(w, w, 2.0);
    }
    errors[r] = testing::error_message([&] { sync.after_run(); });
  });
  for (int64_t step = 1; step <= 7; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    if (step % 3 == 0 || step == 7)
      EXPECT_EQ(sums[0][step], sums[1][step]);
    else
      EXPECT_NE(sums[0][step], sums[1][step]);
  }
  for (const std::string& e : errors)
    EXPECT_NE(e.find("local SGD: after the last averaging the ranks' parameters differ"),
              std::string::npos)
        << e;
}

// float16 under local SGD: the gradients are each rank's own, so one rank's overflow skips the
// step on both. Under ddp they were all-reduced (an inf on one is an inf on all): no collective.
TEST(LocalSgdSyncThreads, AnOverflowOnOneRankSkipsTheStepOnEvery) {
  std::vector<int> local(2), agreed(2);
  testing::run_cpu_ranks(2, {}, [&](Communicator& comm) {
    const int r = comm.rank();
    DistributedDataParallel ddp(model(), comm);
    auto opt = make_optimizer(optimizer("sgd"), ddp.named_parameters());
    LocalSgdSync sync(ddp, *opt, 2, false);
    agreed[r] = sync.any_rank_overflowed(/*found_inf=*/r == 1);
    local[r] = DdpSync(ddp).any_rank_overflowed(r == 1);
  });
  EXPECT_EQ(agreed, (std::vector<int>{1, 1}));
  EXPECT_EQ(local, (std::vector<int>{0, 1}));
}

// --parallel dp: a checkpoint resumed loads into replica 0 (DataParallel's parameters); with
// DataParallelSync every replica holds it before the next step, without it replica 1 would keep
// its own (here: the initial weights) and the replicas would part.
TEST(DataParallelSync, AResumedCheckpointReachesEveryReplica) {
  ScratchDir dir;
  const std::string path = dir.path("c.safetensors");
  auto build = [] {
    return std::make_unique<DataParallel>([](Device) { return std::unique_ptr<Module>(model()); },
                                          std::vector<Device>{Device::cpu(), Device::cpu()});
  };
  {
    auto dp = build();
    auto opt = dp->make_optimizer(optimizer("sgd"));
    auto data = loader(8);
    DataParallelSync sync(*dp);
    TrainerOptions to;
    to.total_steps = 3;
    to.replica_sync = &sync;
    Trainer trainer(*dp, *opt, *data, to);
    trainer.run();
    trainer.save_checkpoint(path);
  }
  for (const bool with_sync : {true, false}) {
    SCOPED_TRACE(with_sync ? "DataParallelSync" : "no sync");
    auto dp = build();
    const Weights initial = weights(dp->replica(1));
    auto opt = dp->make_optimizer(optimizer("sgd"));
    auto data = loader(8);
    DataParallelSync sync(*dp);
    TrainerOptions to;
    to.total_steps = 6;
    if (with_sync) to.replica_sync = &sync;
    Trainer(*dp, *opt, *data, to).resume(path);
    ASSERT_NE(weights(dp->replica(0)), initial) << "the checkpoint was loaded";
    if (with_sync)
      EXPECT_EQ(weights(dp->replica(1)), weights(dp->replica(0)));
    else
      EXPECT_EQ(weights(dp->replica(1)), initial);
  }
}

}  // namespace
}  // namespace minitrain
