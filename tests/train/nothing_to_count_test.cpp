// Issue 30, the rest of the medium list, through the library API: a batch with nothing to count
// (every row ignore_index, or of a class weighted 0) contributes nothing to training or to a
// held-out evaluation, and a stop request (SIGINT/SIGTERM) that arrives between held-out batches
// ends the evaluation at the next batch and the run as a stop during training does.

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "nn/loss.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/metrics_log.h"
#include "train/replica_sync.h"
#include "train/trainer.h"
#include "train/validation.h"

namespace minitrain {
namespace {

using testing::log_lines;
using testing::ScratchDir;

// 8 rows of 2 features; class labels as given (one per row).
std::shared_ptr<TensorDataset> labelled_rows(const std::vector<float>& labels) {
  const auto n = static_cast<int64_t>(labels.size());
  std::vector<float> x;
  for (int64_t i = 0; i < n; ++i) {
    x.push_back(0.1f * static_cast<float>(i) - 0.3f);
    x.push_back(0.5f - 0.07f * static_cast<float>(i * i % 5));
  }
  return std::make_shared<TensorDataset>(Tensor::from_vector(x, {n, 2}),
                                         Tensor::from_vector(labels, {n, 1}));
}

struct EmptyBatchCase {
  const char* name;
  std::vector<float> labels;  // rows 2 and 3 (step 2's batch, in file order) count for nothing
  LossOptions loss;
};

void PrintTo(const EmptyBatchCase& c, std::ostream* os) { *os << c.name; }

LossOptions cross_entropy(int64_t ignore_index, std::vector<double> class_weights = {}) {
  LossOptions o;
  o.name = "cross_entropy";
  o.ignore_index = ignore_index;
  o.class_weights = std::move(class_weights);
  return o;
}

class NothingToCount : public ::testing::TestWithParam<EmptyBatchCase> {};

// Batches of 2 in file order, 4 steps (one epoch). Step 2's batch has nothing to count: torch's
// mean there is 0/0 (a NaN loss and gradient; a torch user must skip the step by hand). Here it
// makes no update (SGD with momentum would move the weights even on a zero gradient), is logged
// as such, and is left out of the epoch's mean and of a --log-every interval's.
TEST_P(NothingToCount, ABatchWhoseRowsAllCountForNothingMakesNoUpdate) {
  ScratchDir dir;
  Generator gen(5);
  auto model = make_mlp({2, 8, 3}, Activation::ReLU, gen);  // 3 classes
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.1;
  oc.momentum = 0.9;
  auto opt = make_optimizer(oc, model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = 2;
  lo.shuffle = false;
  DataLoader loader(labelled_rows(GetParam().labels), lo);
  MetricsLog log(dir.path("m.jsonl"));
  MetricsLog interval_log(dir.path("every4.jsonl"), -1, /*every=*/4);

  std::vector<StepStats> steps;
  std::vector<std::string> weights;  // after each step
  TrainerOptions o;
  o.total_steps = 4;
  o.generator = &gen;
  o.loss = make_loss(GetParam().loss);
  o.log = &log;
  o.on_step = [&](const StepStats& s) {
    steps.push_back(s);
    interval_log.write(s);
    std::string bytes;
    for (const auto& [name, t] : state_dict(*model)) bytes += testing::tensor_bytes(t);
    weights.push_back(bytes);
  };
  TrainSummary summary;
  ASSERT_NO_THROW(summary = Trainer(*model, *opt, loader, o).run());
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(summary.last_step, 4);
  EXPECT_FALSE(steps[0].nothing_counted);
  EXPECT_TRUE(steps[1].nothing_counted);
  EXPECT_TRUE(std::isnan(steps[1].loss));
  EXPECT_EQ(weights[1], weights[0]) << "a step with nothing to count changed the weights";
  EXPECT_NE(weights[2], weights[1]) << "the next step made no update";
  for (std::size_t i : {0u, 2u, 3u}) EXPECT_TRUE(std::isfinite(steps[i].loss)) << "step " << i + 1;
  EXPECT_DOUBLE_EQ(summary.epoch_loss, (steps[0].loss + steps[2].loss + steps[3].loss) / 3);
  EXPECT_EQ(summary.last_loss, steps[3].loss);

  const auto lines = log_lines(dir.path("m.jsonl"));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_TRUE(lines[1]["loss"].is_null()) << lines[1];
  EXPECT_EQ(lines[1].value("no_counted_rows", false), true) << lines[1];
  EXPECT_EQ(lines[1].value("skipped", false), true) << lines[1];
  EXPECT_FALSE(lines[1].contains("loss_nonfinite")) << lines[1];
  EXPECT_FALSE(lines[0].contains("no_counted_rows")) << lines[0];
  const auto interval = log_lines(dir.path("every4.jsonl"));
  ASSERT_EQ(interval.size(), 1u);
  ASSERT_TRUE(interval[0]["loss"].is_number()) << interval[0];
  EXPECT_DOUBLE_EQ(interval[0]["loss"].get<double>(), summary.epoch_loss) << interval[0];
  EXPECT_TRUE(interval[0]["accuracy"].is_number()) << interval[0];
}

INSTANTIATE_TEST_SUITE_P(IgnoredOrWeightedZero, NothingToCount,
                         ::testing::Values(EmptyBatchCase{"every_row_ignore_index",
                                                          {0, 1, -1, -1, 0, 1, 0, 1},
                                                          cross_entropy(-1)},
                                           EmptyBatchCase{"every_row_of_a_class_weighted_zero",
                                                          {1, 2, 0, 0, 1, 2, 2, 1},
                                                          cross_entropy(-100, {0.0, 1.0, 2.0})}),
                         [](const auto& info) { return std::string(info.param.name); });

// Under ddp the ranks agree through the counts' all-reduce: a batch with nothing to count on this
// rank while another rank's counted makes a step that updates (the gradient all-reduce averages
// this rank's zero in), whose loss and accuracy are the other rank's counted batch's. Here
// a ReplicaSync plays the other rank (1 counted batch, loss 0.5, 1 correct of 2 rows).
TEST(NothingToCount, UnderDdpAStepCountsWhenAnyRankHasARowToCount) {
  Generator gen(5);
  auto model = make_mlp({2, 8, 2}, Activation::ReLU, gen);
  auto opt = make_optimizer(OptimizerConfig{}, model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = 2;
  lo.shuffle = false;
  DataLoader loader(labelled_rows({0, 1, -1, -1, 0, 1, 0, 1}), lo);
  // The other rank, played: 1 counted batch of loss 0.5, 1 correct of 2 rows.
  struct OtherRankCounted : ReplicaSync {
    int world_size() const override { return 2; }
    double reduce_loss(double local, bool&) override { return (local + 0.5) / 2; }
    void sum_over_ranks(std::vector<double>& v) override {
      ASSERT_EQ(v.size(), 4u);  // correct, counted rows, loss sum, counted batches
      v[0] += 1;
      v[1] += 2;
      v[2] += 0.5;
      v[3] += 1;
    }
  } other_rank;
  std::vector<StepStats> steps;
  TrainerOptions o;
  o.total_steps = 2;
  o.generator = &gen;
  o.loss = make_loss(cross_entropy(-1));
  o.replica_sync = &other_rank;
  o.on_step = [&](const StepStats& s) { steps.push_back(s); };
  Trainer(*model, *opt, loader, o).run();
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_FALSE(steps[1].nothing_counted);
  EXPECT_DOUBLE_EQ(steps[1].loss, 0.5);  // this rank's empty batch is no part of the mean
  EXPECT_DOUBLE_EQ(steps[1].accuracy, 0.5);
  EXPECT_TRUE(std::isfinite(steps[0].loss));
}

// A run whose every step had nothing to count trained nothing: an error, not "done" with a NaN
// loss and the initial weights saved as trained (as for a run whose every float16 step was
// skipped).
TEST(NothingToCount, ARunWhoseEveryStepCountedNothingFails) {
  ScratchDir dir;
  write_file_atomically(dir.path("t.csv"),
                        "a,b,y\n0.1,0.2,-1\n0.3,0.1,-1\n0.5,0.9,-1\n0.7,0.4,0\n");
  TrainConfig c;
  c.data = dir.path("t.csv");
  c.target_columns = {"y"};
  c.loss = "cross_entropy";
  c.ignore_index = -1;
  c.model = "mlp:2,4,2";
  c.batch_size = 1;
  c.shuffle = false;
  c.steps = 2;  // rows 1 and 2: both ignored
  c.save = dir.path("w.safetensors");
  testing::expect_error<Error>(
      [&] { testing::train(c); },
      {"every step (2 of steps 1-2) had no row to count", "--ignore-index"});
  EXPECT_FALSE(std::filesystem::exists(c.save));
  c.steps = 4;  // the 4th row counts
  EXPECT_NO_THROW(testing::train(c));
}

// A held-out batch with nothing to count adds nothing to the loss's sum or divisor: evaluating in
// batches of 2 (one of them all ignored) gives the loss of one batch of every row.
TEST(NothingToCountHeldOut, ABatchWhoseRowsAllCountForNothingAddsNothing) {
  Generator gen(3);
  auto model = make_mlp({2, 8, 2}, Activation::ReLU, gen);
  const auto rows = labelled_rows({0, 1, -1, -1, 0, 1, 0, 1});
  ValidatorOptions small, whole;
  small.loss = whole.loss = cross_entropy(-1);
  small.batch_size = 2;
  whole.batch_size = 8;
  const ValMetrics a = Validator(rows, small).evaluate(*model);
  const ValMetrics b = Validator(rows, whole).evaluate(*model);
  ASSERT_TRUE(std::isfinite(a.loss));
  EXPECT_NEAR(a.loss, b.loss, 1e-6);  // each batch's sum is rounded to float32 (the logits')
  EXPECT_EQ(a.accuracy, b.accuracy);
  EXPECT_EQ(a.rows, 8);
}

// ---- a stop between held-out batches ----

// Held-out rows that raise the stop flag (as the SIGTERM handler does) while their `at`-th batch
// is gathered: a signal that arrives in the middle of an evaluation, at a known batch.
class SignalWhileGathering final : public Dataset {
 public:
  SignalWhileGathering(std::shared_ptr<const Dataset> rows, std::atomic<int>& flag, int at)
      : rows_(std::move(rows)), flag_(flag), at_(at) {}
  int64_t size() const override { return rows_->size(); }
  int64_t feature_dim() const override { return rows_->feature_dim(); }
  int64_t target_dim() const override { return rows_->target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    if (++gathers == at_) flag_.store(SIGTERM);
    rows_->gather(indices, x, y);
  }
  mutable int gathers = 0;

 private:
  std::shared_ptr<const Dataset> rows_;
  std::atomic<int>& flag_;
  int at_;
};

// SIGTERM during the evaluation after step 2 (its 2nd of 5 batches): the evaluation stops before
// its 3rd batch, records nothing (no val_loss from part of the rows, no best), and the run stops
// as after a step: checkpointed at step 2, stopped_early with the signal.
TEST(StopDuringEvaluation, EndsTheEvaluationAtTheNextBatchAndTheRunAsAStop) {
  ScratchDir dir;
  std::atomic<int> flag{0};
  Generator gen(5);
  auto model = make_mlp({2, 8, 2}, Activation::ReLU, gen);
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.1;
  auto opt = make_optimizer(oc, model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = 2;
  lo.shuffle = false;
  DataLoader loader(labelled_rows({0, 1, 1, 0, 0, 1, 0, 1}), lo);
  // 10 held-out rows in batches of 2; the first evaluation's 2nd gather raises the flag.
  auto val = std::make_shared<SignalWhileGathering>(labelled_rows({0, 1, 1, 0, 1, 0, 0, 1, 1, 0}),
                                                    flag, /*at=*/2);
  ValidatorOptions vo;
  vo.loss = cross_entropy(-100);
  vo.batch_size = 2;
  vo.stop_requested = &flag;
  Validator validator(val, vo);
  MetricsLog log(dir.path("m.jsonl"));

  TrainerOptions o;
  o.total_steps = 6;
  o.generator = &gen;
  o.loss = make_loss(cross_entropy(-100));
  o.log = &log;
  o.stop_requested = &flag;
  o.checkpoint_dir = dir.path("ck");
  std::filesystem::create_directories(o.checkpoint_dir);
  o.validate = [&] { return validator.evaluate(*model); };
  o.eval_every = 2;
  int bests = 0;
  o.on_best = [&](int64_t, const ValMetrics&) { ++bests; };
  const TrainSummary s = Trainer(*model, *opt, loader, o).run();

  EXPECT_EQ(val->gathers, 2) << "the evaluation went on past the batch the signal arrived in";
  EXPECT_TRUE(s.stopped_early);
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(s.last_step, 2);
  EXPECT_FALSE(s.last_val.has_value()) << "a part-evaluation was recorded";
  EXPECT_FALSE(s.best_val.has_value());
  EXPECT_EQ(bests, 0) << "--save-best would have saved on part of the rows";
  ASSERT_TRUE(std::filesystem::exists(checkpoint_path(dir.path("ck"))));
  Generator g2(5);
  auto check = make_mlp({2, 8, 2}, Activation::ReLU, g2);
  auto check_opt = make_optimizer(oc, check->named_parameters());
  EXPECT_EQ(load_checkpoint(checkpoint_path(dir.path("ck")), *check, *check_opt).step, 2);
  const auto lines = log_lines(dir.path("m.jsonl"));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[1].contains("val_loss")) << lines[1];
}

// The run's last step: its evaluation stopped by the signal is not the run's (nothing recorded),
// and the run still reports the stop (a resume then trains nothing, and says so).
TEST(StopDuringEvaluation, AtTheLastStepTheRunReportsTheStop) {
  ScratchDir dir;
  std::atomic<int> flag{0};
  Generator gen(5);
  auto model = make_mlp({2, 8, 2}, Activation::ReLU, gen);
  auto opt = make_optimizer(OptimizerConfig{}, model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = false;
  DataLoader loader(labelled_rows({0, 1, 1, 0, 0, 1, 0, 1}), lo);
  auto val = std::make_shared<SignalWhileGathering>(labelled_rows({0, 1, 1, 0, 1, 0}), flag, 1);
  ValidatorOptions vo;
  vo.loss = cross_entropy(-100);
  vo.batch_size = 2;
  vo.stop_requested = &flag;
  Validator validator(val, vo);
  TrainerOptions o;
  o.total_steps = 1;
  o.generator = &gen;
  o.loss = make_loss(cross_entropy(-100));
  o.stop_requested = &flag;
  o.checkpoint_dir = dir.path("ck");
  std::filesystem::create_directories(o.checkpoint_dir);
  o.validate = [&] { return validator.evaluate(*model); };
  const TrainSummary s = Trainer(*model, *opt, loader, o).run();
  EXPECT_EQ(val->gathers, 1);
  EXPECT_TRUE(s.stopped_early);
  EXPECT_EQ(s.stop_signal, SIGTERM);
  EXPECT_EQ(s.last_step, 1);
  EXPECT_FALSE(s.last_val.has_value());
  EXPECT_TRUE(std::filesystem::exists(checkpoint_path(dir.path("ck"))));
}

}  // namespace
}  // namespace minitrain
