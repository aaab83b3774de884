// What `--parallel ddp` adds to the training loop and the run settings, tested in one process:
// what the Trainer asks of its ReplicaSync (train/replica_sync.h) and when (no_sync before all but
// a step's last backward, the global loss, samples over all ranks, checkpoints written by rank 0
// with a barrier after, local SGD's sync points), a resume on another rank layout at the same
// global sample, per-rank log names, the settings' messages, and --sample-weights (the weighted
// sampler behind it) in a one-process run. tests/train/replica_sync_test.cpp runs the real
// classes on ranks of threads.

#include <gtest/gtest.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "data/readers.h"
#include "nn/mlp.h"
#include "optim/make_optimizer.h"
#include "parallel/comm/thread_communicator.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/config.h"
#include "train/local_sgd_sync.h"
#include "train/metrics_log.h"
#include "train/run_training.h"
#include "train/trainer.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

// 48 rows of a small regression: batches of 4, 8 and 12 all divide it.
struct SmallRun {
  Generator gen{5};
  std::unique_ptr<Sequential> model = make_mlp({3, 8, 1}, Activation::Tanh, gen);
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<DataLoader> loader;
  explicit SmallRun(int64_t batch_size) {
    OptimizerConfig oc;
    oc.name = "sgd";
    oc.lr = 0.05;
    opt = make_optimizer(oc, model->named_parameters());
    DataLoaderOptions lo;
    lo.batch_size = batch_size;
    lo.shuffle = false;
    lo.prefetch = 0;
    loader = std::make_unique<DataLoader>(
        std::make_shared<TensorDataset>(make_synthetic_regression(48, 3, 1, /*seed=*/2)), lo);
  }
};

// Other ranks, played in one process: `world` ranks of which this is `me`; what the Trainer asks
// is recorded, and the global loss is `global_loss`'s answer (null: this rank's).
struct PlayedRanks : ReplicaSync {
  int world = 1, me = 0;
  std::function<double(double local, bool& stop)> global_loss;
  std::vector<bool> last_batches;  // before_backward's argument, per backward
  std::vector<StepEnd> ends;       // after_update's, per finite step
  int checkpoints = 0, loads = 0;

  int world_size() const override { return world; }
  int rank() const override { return me; }
  void before_backward(bool last_batch) override { last_batches.push_back(last_batch); }
  double reduce_loss(double loss, bool& stop) override {
    return global_loss ? global_loss(loss, stop) : loss;
  }
  void after_update(const StepEnd& end) override { ends.push_back(end); }
  void after_weights_loaded() override { ++loads; }
  void after_checkpoint() override { ++checkpoints; }
};

// grad_accum 3 over 7 batches: steps of 3, 3 and 1 batches; only each step's last backward syncs.
TEST(TrainerDdpHooks, OnlyEachStepsLastBackwardSyncs) {
  SmallRun run(8);
  PlayedRanks ranks;
  TrainerOptions o;
  o.total_steps = 3;
  o.grad_accum = 3;
  o.total_batches = 7;
  o.replica_sync = &ranks;
  Trainer(*run.model, *run.opt, *run.loader, o).run();
  EXPECT_EQ(ranks.last_batches, (std::vector<bool>{false, false, true, false, false, true, true}));
}

// The reported loss is reduce_loss's answer; samples count every rank's rows.
TEST(TrainerDdpHooks, ReducedLossAndSamplesOfAllRanksAreReported) {
  SmallRun run(4);
  PlayedRanks ranks;
  ranks.world = 3;
  std::vector<double> seen;
  ranks.global_loss = [&](double local, bool&) {
    seen.push_back(local);
    return 10.0 + static_cast<double>(seen.size());
  };
  TrainerOptions o;
  o.total_steps = 2;
  o.replica_sync = &ranks;
  std::vector<StepStats> steps;
  o.on_step = [&](const StepStats& s) { steps.push_back(s); };
  Trainer trainer(*run.model, *run.opt, *run.loader, o);
  const TrainSummary summary = trainer.run();
  ASSERT_EQ(steps.size(), 2u);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[0], 0.0);
  EXPECT_NE(seen[0], 11.0);
  EXPECT_EQ(steps[0].loss, 11.0);
  EXPECT_EQ(steps[1].loss, 12.0);
  EXPECT_EQ(steps[0].samples, 12);  // 3 ranks x 4 rows
  EXPECT_EQ(summary.samples, 24);
  EXPECT_EQ(trainer.samples_seen(), 24);
}

// A non-finite global loss stops every rank alike, even when this rank's own loss was finite.
TEST(TrainerDdpHooks, ANonFiniteGlobalLossStopsTheRun) {
  SmallRun run(4);
  PlayedRanks ranks;
  ranks.global_loss = [](double, bool&) { return std::nan(""); };
  TrainerOptions o;
  o.total_steps = 3;
  o.replica_sync = &ranks;
  Trainer trainer(*run.model, *run.opt, *run.loader, o);
  EXPECT_THROW(trainer.run(), NonFiniteError);
  EXPECT_EQ(trainer.step(), 0);
}

// A stop request (Ctrl-C) ends the run after the step in progress with a checkpoint; under ddp
// the request travels with the loss, so a rank that got no signal stops after the same step.
TEST(TrainerDdpHooks, AStopRequestOnAnyRankEndsTheRunAfterTheSameStepWithACheckpoint) {
  for (const bool this_rank_signalled : {true, false}) {
    SCOPED_TRACE(this_rank_signalled ? "signal on this rank" : "signal on another rank");
    ScratchDir dir;
    SmallRun run(4);
    std::atomic<int> requested{0};
    TrainerOptions o;
    o.total_steps = 10;
    o.checkpoint_dir = dir.path("ckpt");  // checkpoint_every 0: only at the end, or at a stop
    std::filesystem::create_directories(o.checkpoint_dir);
    o.stop_requested = &requested;
    int64_t step = 0;
    o.on_step = [&](const StepStats& s) { step = s.step; };
    PlayedRanks ranks;
    ranks.world = 2;
    ranks.global_loss = [&](double local, bool& stop) {
      if (step + 1 == 3) {  // the signal arrives during step 3, here or on the other rank
        if (this_rank_signalled) requested = SIGINT;
        stop = true;
      }
      return local;
    };
    o.replica_sync = &ranks;
    Trainer trainer(*run.model, *run.opt, *run.loader, o);
    const TrainSummary summary = trainer.run();
    EXPECT_TRUE(summary.stopped_early);
    EXPECT_EQ(summary.stop_signal, this_rank_signalled ? SIGINT : 0);
    EXPECT_EQ(summary.last_step, 3);
    EXPECT_EQ(trainer.step(), 3);
    EXPECT_EQ(summary.last_checkpoint, checkpoint_path(dir.path("ckpt")));
    EXPECT_EQ(read_checkpoint_metadata(summary.last_checkpoint).at("step"), "3");
  }
}

// Rank > 0 writes nothing, but passes the barrier after each checkpoint like rank 0.
TEST(TrainerDdpHooks, OnlyTheWritingRankWritesCheckpointsAndEveryRankWaits) {
  for (bool writer : {true, false}) {
    ScratchDir dir;
    SmallRun run(4);
    PlayedRanks ranks;
    ranks.world = 2;
    ranks.me = writer ? 0 : 1;
    TrainerOptions o;
    o.total_steps = 5;
    o.checkpoint_dir = dir.path("ckpt");
    o.checkpoint_every = 2;
    o.replica_sync = &ranks;
    std::filesystem::create_directories(o.checkpoint_dir);
    Trainer(*run.model, *run.opt, *run.loader, o).run();
    EXPECT_EQ(ranks.checkpoints, 3) << "steps 2, 4 and the last, 5";
    EXPECT_EQ(std::filesystem::exists(checkpoint_path(o.checkpoint_dir)), writer);
  }
}

// 2 ranks x 4 rows stop after 3 batches (24 rows); 1 rank x 8 continues at its batch 3, which
// holds the same rows 24..31; 1 rank x 16 has no batch starting at row 24.
TEST(TrainerDdpHooks, ResumeOnAnotherLayoutContinuesAtTheSameGlobalSample) {
  ScratchDir dir;
  const std::string path = dir.path("c.safetensors");
  {
    SmallRun run(4);
    PlayedRanks two;
    two.world = 2;
    TrainerOptions o;
    o.total_steps = 3;
    o.replica_sync = &two;
    Trainer trainer(*run.model, *run.opt, *run.loader, o);
    trainer.run();
    trainer.save_checkpoint(path);
  }
  SmallRun wide(8);
  PlayedRanks one;
  TrainerOptions o;
  o.total_steps = 6;
  o.replica_sync = &one;
  Trainer trainer(*wide.model, *wide.opt, *wide.loader, o);
  trainer.resume(path);
  EXPECT_EQ(one.loads, 1) << "the sync hears of the weights loaded (dp broadcasts them)";
  EXPECT_EQ(trainer.step(), 3);
  EXPECT_EQ(trainer.batches_seen(), 3);
  EXPECT_EQ(trainer.samples_seen(), 24);
  const Batch next = wide.loader->next();
  EXPECT_EQ(next.index, 3);

  SmallRun wider(16);
  Trainer refused(*wider.model, *wider.opt, *wider.loader, o);
  const std::string msg = testing::error_message([&] { refused.resume(path); });
  EXPECT_NE(
      msg.find("written by 2 rank(s) x batch size 4 (global batch 8) after 24 rows of epoch 0"),
      std::string::npos)
      << msg;
  EXPECT_NE(msg.find("this run's 1 rank(s) x batch size 16 (global batch 16)"), std::string::npos)
      << msg;
}

// Local SGD (--sync-every 4): the replicas are averaged after steps 4 and 8, after the last step
// (10), and after every checkpoint (3, 6, 9), the checkpoints saying so; an evaluation is one too.
// The Trainer says what follows each step (StepEnd); LocalSgdSync decides from it.
TEST(TrainerLocalSgd, ReplicasAreAveragedAtSyncPointsCheckpointsAndTheLastStep) {
  auto comms = make_thread_communicators({Device::cpu()});  // one rank: constructs alone
  Generator gen(7);
  DistributedDataParallel ddp(make_mlp({3, 4, 1}, Activation::Tanh, gen), *comms[0]);
  OptimizerConfig oc;
  oc.name = "sgd";
  auto opt = make_optimizer(oc, ddp.named_parameters());
  const LocalSgdSync every4(ddp, *opt, 4, false), every100(ddp, *opt, 100, false);
  auto averagings = [](const LocalSgdSync& sync, const std::vector<StepEnd>& ends) {
    std::vector<std::pair<int64_t, bool>> out;  // (the step it follows, with a checkpoint)
    for (const StepEnd& e : ends)
      if (sync.is_sync_point(e)) out.emplace_back(e.step, e.checkpoint);
    return out;
  };

  ScratchDir dir;
  SmallRun run(4);
  PlayedRanks ranks;
  TrainerOptions o;
  o.total_steps = 10;
  o.checkpoint_dir = dir.path("ckpt");
  o.checkpoint_every = 3;
  o.replica_sync = &ranks;
  std::filesystem::create_directories(o.checkpoint_dir);
  Trainer(*run.model, *run.opt, *run.loader, o).run();
  ASSERT_EQ(ranks.ends.size(), 10u);
  EXPECT_TRUE(ranks.ends.back().last);
  EXPECT_EQ(averagings(every4, ranks.ends),
            (std::vector<std::pair<int64_t, bool>>{
                {3, true}, {4, false}, {6, true}, {8, false}, {9, true}, {10, true}}));

  SmallRun evaluated(4);
  PlayedRanks eranks;
  TrainerOptions e;
  e.total_steps = 5;
  e.eval_every = 2;
  e.validate = [] { return ValMetrics{}; };
  e.replica_sync = &eranks;
  Trainer(*evaluated.model, *evaluated.opt, *evaluated.loader, e).run();
  EXPECT_EQ(averagings(every100, eranks.ends),
            (std::vector<std::pair<int64_t, bool>>{{2, false}, {4, false}, {5, false}}));

  testing::expect_error<ValueError>([&] { LocalSgdSync(ddp, *opt, 0, false); },
                                    {"sync_every must be >= 1, got 0"});
}

TEST(DdpSettings, NoOverlapNeedsDdpAndGradientAllReduces) {
  TrainConfig c;
  c.no_overlap = true;
  testing::expect_error<ValueError>(
      [&] { validate(c); },
      {"--no-overlap orders the gradient all-reduces of --parallel ddp, but --parallel is none",
       "add --parallel ddp"});
  c.parallel = "ddp";
  EXPECT_NO_THROW(validate(c));
  c.sync_every = 4;
  testing::expect_error<ValueError>([&] { validate(c); },
                                    {"--no-overlap", "--sync-every 4", "drop one"});
}

TEST(LocalSgdSettings, SyncEveryNeedsDdpAPositiveKAndMomentsNeedKAboveOne) {
  TrainConfig c;
  c.sync_every = 4;
  testing::expect_error<ValueError>([&] { validate(c); },
                                    {"--sync-every 4 averages the ranks of --parallel ddp, but "
                                     "--parallel is none; add --parallel ddp"});
  c.parallel = "ddp";
  EXPECT_NO_THROW(validate(c));
  c.sync_optimizer_state = true;
  EXPECT_NO_THROW(validate(c));
  c.sync_every = 0;
  testing::expect_error<ValueError>([&] { validate(c); }, {"--sync-every", "0"});
  c.sync_every = 1;
  testing::expect_error<ValueError>([&] { validate(c); },
                                    {"--sync-optimizer-state", "--sync-every K with K > 1"});
  c.sync_every.reset();
  testing::expect_error<ValueError>([&] { validate(c); },
                                    {"--sync-optimizer-state", "add --sync-every K"});
  // The hybrid averages each stage's parameters through that stage's own communicator.
  c.sync_optimizer_state = false;
  c.sync_every = 2;
  c.stages = 2;
  EXPECT_NO_THROW(validate(c));
}

TEST(RankLogPath, RankZeroKeepsThePathOthersInsertTheirRank) {
  EXPECT_EQ(rank_log_path("runs/metrics.jsonl", 0, 4), "runs/metrics.jsonl");
  EXPECT_EQ(rank_log_path("runs/metrics.jsonl", 3, 1), "runs/metrics.jsonl");
  EXPECT_EQ(rank_log_path("runs/metrics.jsonl", 3, 4), "runs/metrics.rank3.jsonl");
  EXPECT_EQ(rank_log_path("runs.v2/metrics", 1, 2), "runs.v2/metrics.rank1");
  EXPECT_EQ(rank_log_path("a.b.log", 2, 3), "a.b.rank2.log");
  EXPECT_EQ(rank_log_path(".hidden", 1, 2), ".hidden.rank1");
}

TEST(DdpSettings, DdpAndHybridAreAccepted) {
  TrainConfig c;
  c.parallel = "ddp";
  EXPECT_NO_THROW(validate(c));
  c.stages = 2;
  c.micro_batches = 4;
  c.devices = "cpu,cpu";
  EXPECT_NO_THROW(validate(c));
}

TEST(DdpSettings, MisplacedFlagsAreRefusedNamingThem) {
  struct Case {
    void (*change)(TrainConfig&);
    const char* expect;
  };
  const Case cases[] = {
      {[](TrainConfig& c) { c.replicas = 2; },
       "--replicas does not go with --parallel ddp: the ranks come from the launcher, one process "
       "per rank "
       "(mpirun -n N, or minitrain launch -n N)"},
      {[](TrainConfig& c) { c.micro_batches = 2; },
       "--micro-batches with --parallel ddp needs --stages S"},
      {[](TrainConfig& c) { c.devices = "cpu,cpu"; },
       "--devices with --parallel ddp lists the devices of one rank's"},
      {[](TrainConfig& c) { c.stages = 9; }, "--stages 9 is more than the 5 layer(s)"},
      {[](TrainConfig& c) { c.stages = 2, c.micro_batches = 100; },
       "--micro-batches 100 is more than --batch-size 64"},
      {[](TrainConfig& c) { c.bucket_size = "lots"; }, "--bucket-size 'lots'"},
      {[](TrainConfig& c) { c.all_reduce = "tree"; },
       "--all-reduce: unknown value 'tree' (choose one of: native, ring)"},
  };
  for (const Case& k : cases) {
    TrainConfig c;
    c.parallel = "ddp";
    k.change(c);
    const std::string msg = testing::error_message([&] { validate(c); });
    EXPECT_NE(msg.find(k.expect), std::string::npos) << msg;
  }
}

TrainConfig weighted_run(const std::string& weights) {
  TrainConfig c;
  c.model = "mlp:4,8,1";
  c.data = "synthetic:20";
  c.batch_size = 5;
  c.steps = 4;
  c.device = "cpu";
  c.progress = "none";
  c.sample_weights = weights;
  return c;
}

TEST(SampleWeights, ARunDrawsRowsByWeightAndBadWeightsAreNamed) {
  ScratchDir dir;
  std::vector<float> w(20, 1.0f);
  write_npy(dir.path("good.npy"), Tensor::from_vector(w, {20}));
  std::ostringstream info, progress;
  const TrainReport r = run_training(weighted_run(dir.path("good.npy")), info, progress);
  EXPECT_EQ(r.summary.last_step, 4);
  EXPECT_NE(info.str().find("rows drawn by --sample-weights"), std::string::npos) << info.str();

  w[7] = -3.0f;
  write_npy(dir.path("negative.npy"), Tensor::from_vector(w, {20}));
  testing::expect_error<ValueError>(
      [&] { run_training(weighted_run(dir.path("negative.npy")), info, progress); },
      {"--sample-weights", "weight 7 is -3"});
  write_npy(dir.path("short.npy"), Tensor::from_vector(std::vector<float>(19, 1.0f), {19}));
  testing::expect_error<ShapeError>(
      [&] { run_training(weighted_run(dir.path("short.npy")), info, progress); },
      {"holds an array of shape [19] (19 weights) but --data has 20 rows"});
}

}  // namespace
}  // namespace minitrain
