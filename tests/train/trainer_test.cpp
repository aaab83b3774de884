// The training loop through the library API: step semantics (loss before the update, consecutive
// rows without shuffling, gradient accumulation), checkpoints and a resume that is bit-identical
// to an uninterrupted run, and the stop on a non-finite loss.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/parallel_for.h"
#include "core/safetensors.h"
#include "data/readers.h"
#include "kernels/loss/mse_loss.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/trainer.h"

namespace minitrain {
namespace {

using testing::ScratchDir;
using testing::tensor_bytes;

// A small regression with several outputs and a partial last batch (50 rows, batches of 8).
std::shared_ptr<const Dataset> small_data() {
  return std::make_shared<TensorDataset>(make_synthetic_regression(50, 3, 2, /*seed=*/11));
}

// Everything one run needs, built the same way every time from (optimizer config, seed).
struct TinyRun {
  Generator gen;
  std::unique_ptr<Sequential> model;
  std::unique_ptr<Optimizer> opt;
  std::unique_ptr<DataLoader> loader;
  std::vector<double> losses;

  TinyRun(const OptimizerConfig& oc, bool shuffle, int64_t batch_size = 8, uint64_t seed = 5)
      : gen(seed) {
    model = make_mlp({3, 16, 2}, Activation::Tanh, gen);
    opt = make_optimizer(oc, model->named_parameters());
    DataLoaderOptions lo;
    lo.batch_size = batch_size;
    lo.shuffle = shuffle;
    lo.seed = seed;
    loader = std::make_unique<DataLoader>(small_data(), lo);
  }
  TrainerOptions options(int64_t steps) {
    TrainerOptions o;
    o.total_steps = steps;
    o.generator = &gen;
    o.on_step = [this](const StepStats& s) { losses.push_back(s.loss); };
    return o;
  }
  std::string weights() {
    std::string bytes;
    for (const auto& [name, t] : state_dict(*model)) bytes += name + tensor_bytes(t);
    return bytes;
  }
};

OptimizerConfig sgd_config() {
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.05;
  return oc;
}

TEST(Trainer, StepsForEpochsRoundsUpPartialAccumulation) {
  EXPECT_EQ(steps_for_epochs(1, 7, 1), 7);
  EXPECT_EQ(steps_for_epochs(2, 7, 2), 7);
  EXPECT_EQ(steps_for_epochs(3, 7, 4), 6);
  EXPECT_THROW(steps_for_epochs(0, 7, 1), ValueError);
}

// With --no-shuffle, step k's batch is rows [8(k-1), 8k) of the file, and the logged loss is that
// batch's loss under the weights BEFORE step k's update (lr 0 keeps the weights fixed, so every
// logged loss must equal the loss of its rows under the initial model).
TEST(Trainer, LossIsTheBatchLossBeforeTheUpdateOnConsecutiveRows) {
  OptimizerConfig oc = sgd_config();
  oc.lr = 0.0;
  TinyRun run(oc, /*shuffle=*/false);
  Trainer(*run.model, *run.opt, *run.loader, run.options(7))
      .run();  // 7 batches: 6 full, then 2 rows
  ASSERT_EQ(run.losses.size(), 7u);

  const auto data = small_data();
  const auto* td = dynamic_cast<const TensorDataset*>(data.get());
  MSELoss loss;
  for (int64_t k = 0; k < 7; ++k) {
    const int64_t rows = std::min<int64_t>(8, 50 - 8 * k);
    const Tensor pred = run.model->forward(td->features().narrow(8 * k, rows));
    const double want = loss.forward(pred, td->targets().narrow(8 * k, rows)).item();
    EXPECT_EQ(run.losses[static_cast<std::size_t>(k)], want) << "step " << k + 1;
  }
}

// Two batches of 8 accumulated are one batch of 16 (the loss gradient is scaled by 1/2, as
// torch users divide the loss): the weights agree within float32 rounding of the summation order.
TEST(Trainer, GradientAccumulationMatchesTheLargerBatch) {
  TinyRun accumulated(sgd_config(), false, /*batch_size=*/8);
  TrainerOptions o = accumulated.options(3);
  o.grad_accum = 2;
  Trainer(*accumulated.model, *accumulated.opt, *accumulated.loader, o).run();

  TinyRun big(sgd_config(), false, /*batch_size=*/16);
  Trainer(*big.model, *big.opt, *big.loader, big.options(3)).run();

  const auto a = state_dict(*accumulated.model), b = state_dict(*big.model);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_ALLCLOSE(a[i].second, b[i].second, 1e-6, 1e-5);
  // The logged loss of an accumulated step is the mean of its batches' losses: close to, not equal
  // to, the loss of the larger batch (both batches are full here, so equal weight).
  for (std::size_t i = 0; i < 3; ++i) EXPECT_NEAR(accumulated.losses[i], big.losses[i], 1e-5);
}

struct ResumeCase {
  const char* name;
  OptimizerConfig optimizer;
};

class TrainerResume : public ::testing::TestWithParam<ResumeCase> {};

// Train 20 steps straight; train again, stop after step 13 (checkpoint at 10), and resume a fresh
// model, optimizer and loader from the checkpoint to step 20: the weights and every logged loss
// must be bit-identical (CPU), with shuffling, a cosine schedule with warm-up, clipping, gradient
// accumulation over epoch boundaries and a partial last batch all in play.
TEST_P(TrainerResume, IsBitIdenticalToAnUninterruptedRun) {
  ScratchDir dir;
  const OptimizerConfig oc = GetParam().optimizer;
  const auto configure = [&](TinyRun& run) {
    TrainerOptions o = run.options(20);
    o.grad_accum = 2;
    o.clip_grad_norm = 0.5;
    o.schedule = linear_warmup(cosine_lr(20), 3);
    o.checkpoint_dir = dir.path("ckpt");
    o.checkpoint_every = 10;
    return o;
  };
  std::filesystem::create_directories(dir.path("ckpt"));

  TinyRun straight(oc, /*shuffle=*/true);
  TrainerOptions so = configure(straight);
  so.checkpoint_dir.clear();
  Trainer(*straight.model, *straight.opt, *straight.loader, so).run();

  TinyRun first(oc, true);
  TrainerOptions fo = configure(first);
  fo.on_step = [&](const StepStats& s) {
    first.losses.push_back(s.loss);
    if (s.step == 13) throw std::runtime_error("interrupted");
  };
  EXPECT_THROW(Trainer(*first.model, *first.opt, *first.loader, fo).run(), std::runtime_error);

  TinyRun resumed(oc, true, 8, /*seed=*/5);
  Trainer trainer(*resumed.model, *resumed.opt, *resumed.loader, configure(resumed));
  trainer.resume(checkpoint_path(dir.path("ckpt")));
  EXPECT_EQ(trainer.step(), 10);
  const TrainSummary summary = trainer.run();
  EXPECT_EQ(summary.first_step, 11);
  EXPECT_EQ(summary.last_step, 20);

  std::vector<double> joined(first.losses.begin(), first.losses.begin() + 10);
  joined.insert(joined.end(), resumed.losses.begin(), resumed.losses.end());
  ASSERT_EQ(joined.size(), straight.losses.size());
  for (std::size_t i = 0; i < joined.size(); ++i)
    EXPECT_EQ(joined[i], straight.losses[i]) << "step " << i + 1;
  EXPECT_TRUE(resumed.weights() == straight.weights()) << "weights differ after resuming";
  EXPECT_EQ(resumed.gen.offset(), straight.gen.offset());
}

OptimizerConfig make_oc(const char* name, double lr) {
  OptimizerConfig oc;
  oc.name = name;
  oc.lr = lr;
  return oc;
}

ResumeCase sgd_nesterov() {
  OptimizerConfig oc = make_oc("sgd", 0.05);
  oc.momentum = 0.9;
  oc.nesterov = true;
  oc.weight_decay = 1e-3;
  return {"sgd_nesterov", oc};
}
ResumeCase adam_amsgrad() {
  OptimizerConfig oc = make_oc("adam", 0.01);
  oc.amsgrad = true;
  return {"adam_amsgrad", oc};
}

ResumeCase rmsprop_centered_momentum() {
  OptimizerConfig oc = make_oc("rmsprop", 0.01);
  oc.momentum = 0.9;
  oc.centered = true;
  oc.alpha = 0.95;
  oc.weight_decay = 1e-3;
  return {"rmsprop_centered_momentum", oc};
}

INSTANTIATE_TEST_SUITE_P(Optimizers, TrainerResume,
                         ::testing::Values(sgd_nesterov(), adam_amsgrad(),
                                           ResumeCase{"adamw", make_oc("adamw", 0.01)},
                                           ResumeCase{"rmsprop", make_oc("rmsprop", 0.01)},
                                           rmsprop_centered_momentum()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(Trainer, ResumeRejectsACheckpointOfAnotherBatchSize) {
  ScratchDir dir;
  TinyRun a(sgd_config(), true);
  TrainerOptions o = a.options(4);
  o.checkpoint_dir = dir.path("");
  Trainer(*a.model, *a.opt, *a.loader, o).run();

  TinyRun b(sgd_config(), true, /*batch_size=*/10);
  Trainer t(*b.model, *b.opt, *b.loader, b.options(8));
  testing::expect_error<ValueError>([&] { t.resume(checkpoint_path(dir.path(""))); },
                                    {"batches_per_epoch 7", "this run has 5"});
}

TEST(Trainer, ResumeIntoAnotherModelIsAShapeErrorThatChangesNothing) {
  ScratchDir dir;
  TinyRun a(sgd_config(), true);
  TrainerOptions o = a.options(2);
  o.checkpoint_dir = dir.path("");
  Trainer(*a.model, *a.opt, *a.loader, o).run();

  Generator gen(1);
  auto other = make_mlp({3, 4, 2}, Activation::Tanh, gen);
  auto opt = make_optimizer(sgd_config(), other->named_parameters());
  const std::string before = tensor_bytes(state_dict(*other)[0].second);
  testing::expect_error<ShapeError>(
      [&] { load_checkpoint(checkpoint_path(dir.path("")), *other, *opt); },
      {"does not fit the model"});
  EXPECT_EQ(tensor_bytes(state_dict(*other)[0].second), before);
}

// lr 50 makes SGD diverge within a few steps. The run stops at the first non-finite loss with a
// message naming the step and the lr, and the checkpoint on disk is the last good one: finite
// weights, from a step before the failure.
TEST(Trainer, NonFiniteLossStopsTheRunAndKeepsTheLastGoodCheckpoint) {
  ScratchDir dir;
  TinyRun run(make_oc("sgd", 50.0), true);
  TrainerOptions o = run.options(200);
  o.checkpoint_dir = dir.path("");
  o.checkpoint_every = 1;
  std::string msg;
  try {
    Trainer(*run.model, *run.opt, *run.loader, o).run();
  } catch (const NonFiniteError& e) {
    msg = e.what();
  }
  ASSERT_FALSE(msg.empty()) << "the run did not stop";
  EXPECT_NE(msg.find("the loss is"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lower --lr (now 50)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("last good checkpoint"), std::string::npos) << msg;
  const int64_t failed_step = std::stoll(msg.substr(msg.find("step ") + 5));

  TinyRun check(make_oc("sgd", 50.0), true);
  const CheckpointPosition p =
      load_checkpoint(checkpoint_path(dir.path("")), *check.model, *check.opt);
  EXPECT_LT(p.step, failed_step);
  EXPECT_NO_THROW(check_parameters_finite(*check.model, "checkpoint"));
  for (const auto& name : dir.listing())
    EXPECT_EQ(name, "checkpoint.safetensors") << "left behind: " << name;
}

TEST(Trainer, CheckpointHoldsModelOptimizerStateAndPosition) {
  ScratchDir dir;
  TinyRun run(make_oc("adam", 0.01), true);
  TrainerOptions o = run.options(9);
  o.checkpoint_dir = dir.path("");
  o.checkpoint_every = 4;
  o.checkpoint_metadata = {{"config", "{}"}};
  Trainer(*run.model, *run.opt, *run.loader, o).run();  // checkpoints at 4, 8 and (the end) 9

  const SafetensorsFile f = read_safetensors(checkpoint_path(dir.path("")));
  EXPECT_EQ(f.metadata.at("step"), "9");
  EXPECT_EQ(f.metadata.at("batches_seen"), "9");
  EXPECT_EQ(f.metadata.at("epoch"), "1");  // 7 batches an epoch
  EXPECT_EQ(f.metadata.at("batch_index"), "2");
  EXPECT_EQ(f.metadata.at("optimizer"), "adam");
  EXPECT_EQ(f.metadata.at("config"), "{}");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("rng_seed"), "5");
  EXPECT_NO_THROW(f.at("model.0.weight"));
  EXPECT_NO_THROW(f.at("model.2.bias"));
  EXPECT_NO_THROW(f.at("optim.0.weight.exp_avg"));
  EXPECT_NO_THROW(f.at("optim.2.bias.exp_avg_sq"));
}

TEST(Trainer, MetricsLogHasOneJsonLinePerStep) {
  ScratchDir dir;
  TinyRun run(sgd_config(), true);
  MetricsLog log(dir.path("m.jsonl"));
  TrainerOptions o = run.options(5);
  o.log = &log;
  Trainer(*run.model, *run.opt, *run.loader, o).run();

  std::istringstream in(read_file_bytes(dir.path("m.jsonl")));
  std::string line, last;
  int n = 0;
  while (std::getline(in, line)) {
    last = line;
    ++n;
    EXPECT_EQ(line.rfind("{\"step\":" + std::to_string(n) + ",\"epoch\":1,\"loss\":", 0), 0u)
        << line;
    for (const char* key :
         {"\"lr\":0.05",
          "\"step_ms\":", "\"samples_per_s\":", "\"cpu_utilization\":", "\"device\":\"cpu\"",
          "\"memory_in_use_bytes\":", "\"memory_peak_bytes\":", "\"host_memory_peak_bytes\":"})
      EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
    EXPECT_EQ(line.find("\"gpu_"), std::string::npos) << "GPU fields on the CPU: " << line;
  }
  EXPECT_EQ(n, 5);
  // The process's own peak resident memory: a test binary holds at least a MiB.
  ASSERT_NE(last.find("\"host_memory_peak_bytes\":"), std::string::npos) << last;
  EXPECT_EQ(last.find("\"host_memory_peak_bytes\":0,"), std::string::npos) << last;
  EXPECT_EQ(last.find("\"host_memory_peak_bytes\":0}"), std::string::npos) << last;
}

TEST(Trainer, AMetricsLineSpellsOutANonFiniteLoss) {
  StepStats s;
  s.step = 3;
  s.loss = std::numeric_limits<double>::infinity();
  EXPECT_NE(metrics_json_line(s).find("\"loss\":null,\"loss_nonfinite\":\"inf\""),
            std::string::npos)
      << metrics_json_line(s);
  s.loss = std::nan("");
  EXPECT_NE(metrics_json_line(s).find("\"loss_nonfinite\":\"nan\""), std::string::npos);
  s.loss = 0.5;
  EXPECT_EQ(metrics_json_line(s).find("loss_nonfinite"), std::string::npos);
}

// --log-every N: a line at steps N, 2N, ... and the last, each holding its steps' means.
TEST(Trainer, MetricsLogEveryNStepsWritesTheMeansOfEachInterval) {
  ScratchDir dir;
  const std::string path = dir.path("m.jsonl");
  std::vector<StepStats> steps;
  {
    MetricsLog log(path, -1, /*every=*/3);
    for (int64_t k = 1; k <= 7; ++k) {
      StepStats s;
      s.step = k;
      s.total_steps = 7;
      s.epoch = k <= 4 ? 1 : 2;
      s.loss = 0.5 * static_cast<double>(k);  // 0.5, 1.0, ... exact in binary
      s.lr = 0.1 * static_cast<double>(k);
      s.step_ms = static_cast<double>(k);
      s.cpu_ms = static_cast<double>(3 * k - 2);  // 1, 4, 7 ms of CPU in 1, 2, 3 ms
      if (k <= 3) s.gpu = GpuUsage{10.0 * (k == 3 ? 6 : k), uint64_t(k == 2 ? 9 : 5), 16};
      s.samples = 4;
      s.grad_norm = static_cast<double>(2 * k);
      s.memory_peak = static_cast<uint64_t>(k == 2 ? 900 : 100 * k);
      log.write(s);
    }
  }
  std::istringstream in(read_file_bytes(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u) << read_file_bytes(path);
  // Steps 1-3: loss mean 1.0, step_ms mean 2, 12 samples in 6 ms, grad_norm mean 4, peak 900.
  EXPECT_EQ(lines[0].rfind("{\"step\":3,\"steps\":3,\"epoch\":1,\"loss\":1.0,", 0), 0u) << lines[0];
  // CPU: 12 ms in 6 ms, 2 cores (not the mean of the steps' ratios, 1.78); GPU: utilisation
  // mean 30%, the highest memory in use.
  for (const char* part :
       {"\"step_ms\":2.0", "\"samples_per_s\":2000.0", "\"grad_norm\":4.0",
        "\"memory_peak_bytes\":900", "\"cpu_utilization\":2.0", "\"gpu_utilization_pct\":30.0",
        "\"gpu_memory_used_bytes\":9", "\"gpu_memory_total_bytes\":16"})
    EXPECT_NE(lines[0].find(part), std::string::npos) << part << " in " << lines[0];
  EXPECT_EQ(lines[1].find("gpu_"), std::string::npos) << "steps without GPU figures: " << lines[1];
  // Steps 4-6 (epoch and lr: the last step's), then the run's last step alone.
  EXPECT_EQ(lines[1].rfind("{\"step\":6,\"steps\":3,\"epoch\":2,\"loss\":2.5,", 0), 0u) << lines[1];
  EXPECT_EQ(lines[2].rfind("{\"step\":7,\"steps\":1,\"epoch\":2,\"loss\":3.5,", 0), 0u) << lines[2];
  // A run that stops between lines keeps its last steps: flush_pending writes them.
  {
    MetricsLog log(path, -1, 4);
    StepStats s;
    s.total_steps = 100;
    for (s.step = 1; s.step <= 2; ++s.step) log.write(s);
    EXPECT_EQ(read_file_bytes(path), "");
    log.flush_pending();
    log.flush_pending();  // nothing more to write
  }
  EXPECT_EQ(read_file_bytes(path).rfind("{\"step\":2,\"steps\":2,", 0), 0u)
      << read_file_bytes(path);
  testing::expect_error<ValueError>([&] { MetricsLog log(path, -1, 0); }, {"--log-every", "got 0"});
}

TEST(Trainer, ResumedMetricsLogDropsStepsAfterTheCheckpoint) {
  ScratchDir dir;
  const std::string path = dir.write_raw("m.jsonl", "{\"step\":1}\n{\"step\":2}\n{\"step\":3}\n");
  {
    MetricsLog log(path, /*continue_after_step=*/2);
    StepStats s;
    s.step = 3;
    log.write(s);
  }
  const std::string text = read_file_bytes(path);
  EXPECT_EQ(text.rfind("{\"step\":1}\n{\"step\":2}\n{\"step\":3,", 0), 0u) << text;
}

TEST(Trainer, ResumedMetricsLogDropsATornLastLineWithANote) {
  // A full disk (or a kill) cut the last write short: resuming used to refuse the whole log.
  ScratchDir dir;
  for (const std::string torn : {"{\"step\":3,\"lo", "{\"step\":3,\"lo\n", "{\"st"}) {
    SCOPED_TRACE(torn);
    const std::string path = dir.write_raw("m.jsonl", "{\"step\":1}\n{\"step\":2}\n" + torn);
    MetricsLog log(path, /*continue_after_step=*/2);
    EXPECT_NE(log.repair_note().find("m.jsonl:3: dropped a torn last line"), std::string::npos)
        << log.repair_note();
    EXPECT_EQ(read_file_bytes(path), "{\"step\":1}\n{\"step\":2}\n");
  }
  // A bad line before the last is not a torn write: still an error naming it.
  const std::string path = dir.write_raw("bad.jsonl", "{\"step\":1}\nnot json\n{\"step\":2}\n");
  testing::expect_error<IoError>([&] { MetricsLog log(path, 2); },
                                 {"bad.jsonl:2: not a metrics line"});
  // An intact log needs no note.
  const std::string good = dir.write_raw("good.jsonl", "{\"step\":1}\n");
  EXPECT_EQ(MetricsLog(good, 1).repair_note(), "");
}

}  // namespace
}  // namespace minitrain

namespace minitrain {
namespace {

// A data set that takes 20 ms to gather a batch: a loader that cannot keep up.
class SlowDataset final : public Dataset {
 public:
  SlowDataset() : rows_(make_synthetic_regression(32, 3, 2, 1)) {}
  int64_t size() const override { return rows_.size(); }
  int64_t feature_dim() const override { return rows_.feature_dim(); }
  int64_t target_dim() const override { return rows_.target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    rows_.gather(indices, x, y);
  }

 private:
  TensorDataset rows_;
};

// `steps` SGD steps of an MLP of `sizes` on `data`, its batches prepared on the step's own thread
// (no loader workers: every batch is waited for); the steps' stats.
std::vector<StepStats> steps_on(std::shared_ptr<const Dataset> data,
                                const std::vector<int64_t>& sizes, int64_t batch_size,
                                int64_t steps) {
  Generator gen(1);
  auto model = make_mlp(sizes, Activation::Tanh, gen);
  auto opt = make_optimizer(sgd_config(), model->named_parameters());
  DataLoaderOptions lo;
  lo.batch_size = batch_size;
  lo.workers = 0;
  DataLoader loader(std::move(data), lo);
  TrainerOptions o;
  o.total_steps = steps;
  std::vector<StepStats> stats;
  o.on_step = [&](const StepStats& s) { stats.push_back(s); };
  Trainer(*model, *opt, loader, o).run();
  return stats;
}

// The step's wait for its batch is reported apart: a starved step shows it, a fed one does not.
TEST(Trainer, StepsReportTheirWaitForData) {
  for (bool slow : {true, false}) {
    std::shared_ptr<const Dataset> data =
        slow ? std::shared_ptr<const Dataset>(std::make_shared<SlowDataset>()) : small_data();
    const std::vector<StepStats> steps = steps_on(data, {3, 8, 2}, 8, 3);
    ASSERT_EQ(steps.size(), 3u);
    for (const StepStats& s : steps) {
      EXPECT_LE(s.data_wait_ms, s.step_ms) << "step " << s.step;
      if (slow)
        EXPECT_GE(s.data_wait_ms, 19.0) << "step " << s.step;
      else
        EXPECT_LT(s.data_wait_ms, 15.0) << "step " << s.step;
    }
    EXPECT_NE(metrics_json_line(steps.back()).find("\"data_wait_ms\":"), std::string::npos);
  }
}

// cpu_utilization is CPU time over wall time: a step that computes keeps up to its threads busy,
// one that sleeps waiting for its batch keeps almost none, though both take their time.
TEST(Trainer, StepsReportTheCoresTheyKeepBusy) {
  for (bool waiting : {false, true}) {
    SCOPED_TRACE(waiting ? "waiting for data" : "computing");
    // A slow batch on the step's own thread is a sleeping step.
    const std::vector<StepStats> steps =
        waiting
            ? steps_on(std::make_shared<SlowDataset>(), {3, 8, 2}, 8, 4)
            : steps_on(std::make_shared<TensorDataset>(make_synthetic_regression(1024, 64, 2, 3)),
                       {64, 512, 512, 2}, 512, 4);
    ASSERT_EQ(steps.size(), 4u);
    double cpu_ms = 0, step_ms = 0;
    for (const StepStats& s : steps) cpu_ms += s.cpu_ms, step_ms += s.step_ms;
    const double cores = cpu_ms / step_ms;
    EXPECT_GT(cores, 0.0);
    // At most the compute threads (the main thread among them), with slack for the kernel's
    // accounting; how far below depends on what else the machine runs, so no lower bound.
    EXPECT_LT(cores, num_threads() + 0.5);
    if (waiting) {
      EXPECT_LT(cores, 0.5) << "20 ms of sleep in each step";
    }
  }
}

}  // namespace
}  // namespace minitrain
