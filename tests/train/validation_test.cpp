// Held-out evaluation during training: it changes no weight, its loss is the mean over every
// held-out row, and it drives --save-best, --early-stop and the summaries; a resumed run keeps its
// record.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/atomic_file.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "data/readers.h"
#include "kernels/loss/mse_loss.h"
#include "nn/mlp.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"
#include "train/validation.h"

namespace minitrain {
namespace {

using testing::log_lines;
using testing::ScratchDir;

using testing::train;

std::vector<std::string> weight_bytes(const std::string& path) {
  std::vector<std::string> out;
  for (const auto& [name, t] : read_safetensors(path).tensors)
    out.push_back(testing::tensor_bytes(t));
  return out;
}

// 120 rows to train on, and 37 held out as files.
TrainConfig config_with_val_files(const ScratchDir& dir) {
  const TensorDataset train_rows = make_synthetic_regression(120, 4, 1, 11);
  const TensorDataset val_rows = make_synthetic_regression(37, 4, 1, 12);
  write_npy(dir.path("x.npy"), train_rows.features());
  write_npy(dir.path("y.npy"), train_rows.targets());
  write_npy(dir.path("vx.npy"), val_rows.features());
  write_npy(dir.path("vy.npy"), val_rows.targets());
  TrainConfig c;
  c.model = "mlp:4,16,1";
  c.data = dir.path("x.npy");
  c.targets = dir.path("y.npy");
  c.batch_size = 16;
  c.epochs = 3;
  c.seed = 5;
  c.save = dir.path("w.safetensors");
  c.log = dir.path("log.jsonl");
  return c;
}

TEST(Validation, EvaluatingChangesNoWeightAndLogsEachEvaluation) {
  ScratchDir plain_dir, val_dir;
  const TrainConfig plain = config_with_val_files(plain_dir);
  train(plain);
  TrainConfig val = config_with_val_files(val_dir);
  val.val_data = val_dir.path("vx.npy");
  val.val_targets = val_dir.path("vy.npy");
  val.eval_every = 5;
  std::string info;
  const TrainReport r = train(val, &info);
  EXPECT_EQ(weight_bytes(plain.save), weight_bytes(val.save));
  EXPECT_NE(info.find("held out by --val-data"), std::string::npos) << info;

  // 8 batches per epoch, 24 steps: evaluations after steps 5, 8, 10, 15, 16, 20, 24.
  std::vector<int64_t> evaluated;
  for (const nlohmann::json& j : log_lines(val.log))
    if (j.contains("val_loss")) {
      evaluated.push_back(j["step"].get<int64_t>());
      EXPECT_EQ(j["val_rows"], 37);
    }
  EXPECT_EQ(evaluated, (std::vector<int64_t>{5, 8, 10, 15, 16, 20, 24}));
  ASSERT_TRUE(r.summary.last_val.has_value());
  EXPECT_EQ(r.summary.last_val->rows, 37);
  EXPECT_TRUE(std::isnan(r.summary.last_val->accuracy));  // a regression has no accuracy
}

// The validator's loss is torch's mean over all held-out rows, whatever its batch size.
TEST(Validation, LossIsTheMeanOverAllRowsForAnyBatchSize) {
  Generator gen(3);
  auto model = make_mlp({4, 8, 2}, Activation::Tanh, gen);
  auto data = std::make_shared<TensorDataset>(make_synthetic_regression(23, 4, 2, 4));
  const Tensor want = mse_loss_forward(model->forward(data->features()), data->targets());
  for (int64_t batch : {1, 5, 23, 100}) {
    ValidatorOptions o;
    o.batch_size = batch;
    const ValMetrics m = Validator(data, o).evaluate(*model);
    EXPECT_EQ(m.rows, 23);
    EXPECT_NEAR(m.loss, want.item(), 1e-6 * want.item()) << "batch " << batch;
  }
}

TEST(Validation, ValSplitHoldsOutRowsFromTheData) {
  ScratchDir dir;
  TrainConfig c;
  c.model = "mlp:4,16,1";
  c.data = "synthetic:100";
  c.val_split = 0.25;
  c.epochs = 2;
  c.log = dir.path("log.jsonl");
  std::string info;
  const TrainReport r = train(c, &info);
  EXPECT_NE(info.find("(75 rows, 25 held out by --val-split 0.25 of --data)"), std::string::npos)
      << info;
  ASSERT_TRUE(r.summary.last_val.has_value());
  EXPECT_EQ(r.summary.last_val->rows, 25);
  // The training batches cover 75 rows an epoch: 2 batches of 64 rows at most.
  EXPECT_EQ(r.summary.samples, 150);
}

TEST(Validation, SaveBestKeepsTheWeightsOfTheLowestValLoss) {
  ScratchDir dir;
  TrainConfig c = config_with_val_files(dir);
  c.val_data = dir.path("vx.npy");
  c.val_targets = dir.path("vy.npy");
  c.eval_every = 1;
  c.lr = 0.03;  // large enough for val_loss to go up and down
  c.save_best = dir.path("best.safetensors");
  const TrainReport r = train(c);
  double best = std::numeric_limits<double>::infinity();
  int64_t best_step = 0;
  for (const nlohmann::json& j : log_lines(c.log))
    if (j["val_loss"].get<double>() < best) {
      best = j["val_loss"].get<double>();
      best_step = j["step"].get<int64_t>();
    }
  EXPECT_EQ(r.summary.best_step, best_step);
  EXPECT_EQ(r.saved_best, c.save_best);
  const SafetensorsFile f = read_safetensors(c.save_best);
  EXPECT_EQ(f.metadata.at("step"), std::to_string(best_step));
  EXPECT_DOUBLE_EQ(std::stod(f.metadata.at("val_loss")), best);
  // The best weights score the best val_loss again.
  TrainConfig again = c;
  again.init = c.save_best;
  again.lr = 0;
  again.steps = 1;
  again.epochs.reset();
  again.save_best.clear();
  again.save = dir.path("again.safetensors");
  again.log = dir.path("again.jsonl");
  const TrainReport a = train(again);
  EXPECT_NEAR(a.summary.last_val->loss, best, 1e-6 * best);
}

TEST(Validation, EarlyStopEndsARunWithoutProgressAndResumingItTrainsNothing) {
  ScratchDir dir;
  TrainConfig c = config_with_val_files(dir);
  c.val_split = 0.2;
  c.lr = 0;  // val_loss never goes lower after the first evaluation
  c.eval_every = 1;
  c.early_stop = 3;
  c.checkpoint_dir = dir.path("ckpt");
  const TrainReport r = train(c);
  EXPECT_TRUE(r.summary.early_stopped);
  EXPECT_EQ(r.summary.last_step, 4);  // best at 1, then 3 evaluations without a lower loss
  EXPECT_EQ(r.summary.best_step, 1);
  EXPECT_EQ(log_lines(c.log).size(), 4u);
  c.resume = true;
  const TrainReport again = train(c);
  EXPECT_EQ(again.summary.last_step, 4);  // nothing trained: first > last
  EXPECT_GT(again.summary.first_step, again.summary.last_step);
  EXPECT_TRUE(again.summary.early_stopped);
}

TEST(Validation, AResumedRunKeepsItsBestAndEndsAsOneRun) {
  ScratchDir one_dir, two_dir;
  TrainConfig one = config_with_val_files(one_dir);
  one.val_split = 0.2;
  one.eval_every = 2;
  one.lr = 0.03;
  one.save_best = one_dir.path("best.safetensors");
  const TrainReport a = train(one);

  TrainConfig two = config_with_val_files(two_dir);
  two.val_split = 0.2;
  two.eval_every = 2;
  two.lr = 0.03;
  two.save_best = two_dir.path("best.safetensors");
  two.checkpoint_dir = two_dir.path("ckpt");
  two.epochs.reset();
  two.steps = 9;
  train(two);
  two.steps.reset();
  two.epochs = 3;
  two.resume = true;
  const TrainReport b = train(two);
  EXPECT_EQ(a.summary.best_step, b.summary.best_step);
  ASSERT_TRUE(a.summary.best_val && b.summary.best_val);
  EXPECT_EQ(a.summary.best_val->loss, b.summary.best_val->loss);
  EXPECT_EQ(weight_bytes(one.save_best), weight_bytes(two.save_best));
  EXPECT_EQ(weight_bytes(one.save), weight_bytes(two.save));
}

// --parallel dp and mp evaluate through their wrappers (replicas split the held-out batch, stages
// pass it along): the same val_loss as one device, within float32 rounding.
TEST(Validation, DataAndModelParallelRunsScoreAsOneDevice) {
  ScratchDir dir;
  TrainConfig one = config_with_val_files(dir);
  one.val_data = dir.path("vx.npy");
  one.val_targets = dir.path("vy.npy");
  one.model = "mlp:4,16,16,1";
  one.save.clear();
  one.log.clear();
  one.shuffle = false;
  const TrainReport a = train(one);
  ASSERT_TRUE(a.summary.last_val.has_value());
  TrainConfig dp = one;
  dp.parallel = "dp";
  dp.devices = "cpu,cpu";
  TrainConfig mp = one;
  mp.parallel = "mp";
  mp.devices = "cpu,cpu";
  mp.micro_batches = 2;
  for (const TrainConfig& c : {dp, mp}) {
    const TrainReport r = train(c);
    ASSERT_TRUE(r.summary.last_val.has_value()) << c.parallel;
    EXPECT_EQ(r.summary.last_val->rows, 37) << c.parallel;
    EXPECT_NEAR(r.summary.last_val->loss, a.summary.last_val->loss, 1e-5 * a.summary.last_val->loss)
        << c.parallel;
  }
}

// --data-on-disk reads the same rows as loading does: the same weights and held-out numbers, with
// a shuffled order and a held-out split (views of the rows, not copies). And it trains on features
// ten times larger than the memory cap, which loading them cannot.
TEST(Validation, DataOnDiskTrainsAsLoadedDataAndBeyondTheMemoryCap) {
  ScratchDir a_dir, b_dir;
  TrainConfig loaded = config_with_val_files(a_dir);
  loaded.val_split = 0.2;
  loaded.eval_every = 4;
  TrainConfig disk = config_with_val_files(b_dir);
  disk.val_split = 0.2;
  disk.eval_every = 4;
  disk.data_on_disk = true;
  const TrainReport ra = train(loaded), rb = train(disk);
  EXPECT_EQ(weight_bytes(loaded.save), weight_bytes(disk.save));
  ASSERT_TRUE(ra.summary.last_val && rb.summary.last_val);
  EXPECT_EQ(ra.summary.last_val->loss, rb.summary.last_val->loss);

  ScratchDir big;
  {  // freed before the capped runs: the cap counts every CPU tensor of the process
    const TensorDataset rows = make_synthetic_regression(20000, 16, 1, 3);  // 1.28 MB features
    write_npy(big.path("x.npy"), rows.features());
    write_npy(big.path("y.npy"), rows.targets());
  }
  TrainConfig c;
  c.model = "mlp:16,8,1";
  c.data = big.path("x.npy");
  c.targets = big.path("y.npy");
  c.memory_cap = "128KiB";  // a tenth of the features
  c.steps = 20;
  EXPECT_THROW(train(c), OutOfMemory);
  c.data_on_disk = true;
  EXPECT_EQ(train(c).summary.last_step, 20);
  set_memory_cap(Device::cpu(), 0);  // the cap is the process's: lift it for what follows
}

TEST(Validation, SettingsThatNeedHeldOutDataSaySo) {
  TrainConfig c;
  c.early_stop = 2;
  testing::expect_error<ValueError>([&] { train(c); }, {"--early-stop", "--val-split"});
  c = TrainConfig{};
  c.val_split = 0.2;
  c.val_data = "v.csv";
  testing::expect_error<ValueError>([&] { train(c); }, {"--val-data and --val-split"});
  c = TrainConfig{};
  c.val_split = 1.0;
  testing::expect_error<ValueError>([&] { train(c); }, {"--val-split", "[0, 1)"});
}

}  // namespace
}  // namespace minitrain

namespace minitrain {
namespace {

// Class labels from an integer .npy: the argmax of a 3-output synthetic regression, so there is
// something to learn. Returns the config of a classifier over them.
TrainConfig classifier_config(const ScratchDir& dir, const std::vector<int64_t>& bad_rows = {}) {
  testing::ClassRows rows = testing::three_class_rows(300, 21);
  std::vector<double>& labels = rows.labels;
  for (int64_t r : bad_rows) labels[static_cast<std::size_t>(r)] = 3;  // not a class of 3
  write_npy(dir.path("x.npy"), rows.features);
  // Written as float64 holding integers (an int64 .npy reads the same; see ClassLabels tests).
  write_npy(dir.path("y.npy"), Tensor::from_vector(labels, {300}));
  TrainConfig c;
  c.model = "mlp:4,32,3";
  c.data = dir.path("x.npy");
  c.targets = dir.path("y.npy");
  c.loss = "cross_entropy";
  c.val_split = 0.25;
  c.epochs = 60;
  c.batch_size = 32;
  c.lr = 0.01;
  return c;
}

TEST(Classifier, LearnsHeldOutClassesWithBalancedWeightsAndReportsAccuracy) {
  ScratchDir dir;
  TrainConfig c = classifier_config(dir);
  c.class_weights = "auto";
  c.loss_settings.label_smoothing = 0.05;
  c.topk = 2;
  c.log = dir.path("log.jsonl");
  std::string info;
  const TrainReport r = train(c, &info);
  EXPECT_NE(info.find("cross_entropy loss"), std::string::npos) << info;
  ASSERT_TRUE(r.summary.last_val.has_value());
  // A quarter of each class, rounded per class: 75 rows give or take one per class.
  EXPECT_NEAR(r.summary.last_val->rows, 75, 3);
  EXPECT_GT(r.summary.last_val->accuracy, 0.6);  // chance is about 1/3
  EXPECT_GE(r.summary.last_val->topk_accuracy, r.summary.last_val->accuracy);
  EXPECT_GT(r.summary.epoch_accuracy, 0.6);
  const std::vector<nlohmann::json> lines = log_lines(c.log);
  EXPECT_TRUE(lines.back().contains("accuracy"));
  EXPECT_TRUE(lines.back().contains("val_top2_accuracy"));
}

TEST(Classifier, ALabelOutsideTheClassesNamesItsRowBeforeTraining) {
  ScratchDir dir;
  TrainConfig c = classifier_config(dir, {17});
  c.save = dir.write_raw("w.safetensors", "precious");
  testing::expect_error<ValueError>([&] { train(c); }, {"y.npy", "row 17", "label 3", "[0, 3)"});
  EXPECT_EQ(read_file_bytes(c.save), "precious");
}

TEST(Classifier, WeightFilesMustHaveOneWeightPerClassOrOutput) {
  ScratchDir dir;
  TrainConfig c = classifier_config(dir);
  write_npy(dir.path("w2.npy"), Tensor::from_vector(std::vector<float>{1, 2}, {2}));
  c.class_weights = dir.path("w2.npy");
  testing::expect_error<ShapeError>([&] { train(c); },
                                    {"--class-weights", "[2]", "3 classes", "shape [3]"});
  TrainConfig b = config_with_val_files(dir);
  b.loss = "bce_with_logits";
  b.pos_weight = dir.path("w2.npy");
  testing::expect_error<ShapeError>([&] { train(b); }, {"--pos-weight", "1 outputs", "shape [1]"});
  b.loss = "mse";
  testing::expect_error<ValueError>([&] { train(b); }, {"--pos-weight applies to --loss bce"});
}

}  // namespace
}  // namespace minitrain
