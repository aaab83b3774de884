// `minitrain train` as a library call: the default run learns, a resumed run equals an
// uninterrupted one, and bad input fails before anything is written.

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "core/thread_policy.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

using testing::train;

std::vector<double> logged_losses(const std::string& path) {
  std::istringstream in(read_file_bytes(path));
  std::vector<double> losses;
  std::string line;
  while (std::getline(in, line)) {
    const auto at = line.find("\"loss\":");
    losses.push_back(std::stod(line.substr(at + 7)));
  }
  return losses;
}

// The promise: with no flags, a loss at least 10x below where it started. The library
// default is also what `minitrain train` runs (the CLI test runs the binary itself).
TEST(RunTraining, DefaultRunEndsTenTimesLowerThanItStarts) {
  std::string info;
  const TrainReport r = train(TrainConfig{}, &info);
  EXPECT_NE(info.find("training mlp:4,64,64,1 (relu"), std::string::npos) << info;
  EXPECT_EQ(r.summary.first_step, 1);
  EXPECT_EQ(r.summary.last_step, r.total_steps);
  EXPECT_LE(r.summary.last_loss * 10, r.summary.first_loss)
      << "first " << r.summary.first_loss << ", last " << r.summary.last_loss;
}

TrainConfig small_config(const ScratchDir& dir) {
  TrainConfig c;
  c.model = "mlp:4,16,2";
  c.data = "synthetic:90";
  c.batch_size = 16;
  c.seed = 3;
  c.log = dir.path("log.jsonl");
  c.save = dir.path("w.safetensors");
  return c;
}

// 20 steps straight vs 10, then --resume to 20 (as a user would: same flags, more --steps):
// identical weights files and identical logged losses.
TEST(RunTraining, ResumeGivesTheSameWeightsAndLossesAsOneRun) {
  ScratchDir straight_dir, split_dir;
  TrainConfig straight = small_config(straight_dir);
  straight.steps = 20;
  train(straight);

  TrainConfig split = small_config(split_dir);
  split.checkpoint_dir = split_dir.path("ckpt");
  split.checkpoint_every = 5;
  split.steps = 10;
  train(split);
  split.steps = 20;
  split.resume = true;
  std::string info;
  const TrainReport r = train(split, &info);
  EXPECT_EQ(r.resumed_from_step, 10);
  EXPECT_NE(info.find("resuming after step 10"), std::string::npos) << info;

  const std::vector<double> a = logged_losses(straight.log), b = logged_losses(split.log);
  ASSERT_EQ(a.size(), 20u);
  EXPECT_EQ(a, b);
  const SafetensorsFile wa = read_safetensors(straight.save), wb = read_safetensors(split.save);
  ASSERT_EQ(wa.tensors.size(), 4u);
  for (std::size_t i = 0; i < wa.tensors.size(); ++i) {
    EXPECT_EQ(wa.tensors[i].first, wb.tensors[i].first);
    EXPECT_EQ(testing::tensor_bytes(wa.tensors[i].second),
              testing::tensor_bytes(wb.tensors[i].second))
        << wa.tensors[i].first;
  }
}

// --optimizer rmsprop with --momentum and --centered (its state: square_avg, grad_avg and the
// momentum buffer, in the checkpoint) resumes to the bytes of one straight run, and learns.
TEST(RunTraining, RMSpropWithMomentumResumesToTheSameBytesAsOneRun) {
  ScratchDir straight_dir, split_dir;
  const auto rmsprop = [](TrainConfig c) {
    c.optimizer = "rmsprop";
    c.lr = 0.003;
    c.momentum = 0.9;
    c.centered = true;
    c.alpha = 0.95;
    return c;
  };
  TrainConfig straight = rmsprop(small_config(straight_dir));
  straight.steps = 16;
  const TrainReport once = train(straight);
  EXPECT_LT(once.summary.last_loss, once.summary.first_loss);

  TrainConfig split = rmsprop(small_config(split_dir));
  split.checkpoint_dir = split_dir.path("ckpt");
  split.steps = 7;
  train(split);
  split.steps = 16;
  split.resume = true;
  EXPECT_EQ(train(split).resumed_from_step, 7);
  EXPECT_EQ(logged_losses(split.log), logged_losses(straight.log));
  EXPECT_EQ(read_file_bytes(split.save), read_file_bytes(straight.save));
}

// --workers N prepares batches on N threads: the same batches in the same order, so the same
// losses and weights, byte for byte, as the default (one worker) and as none; a run checkpointed
// with one count resumes with another to the same end.
TEST(RunTraining, WorkersTrainTheSameWeightsForAnyCount) {
  ScratchDir ref_dir;
  TrainConfig ref = small_config(ref_dir);  // 90 rows, batch 16, shuffled: epochs end mid-run
  ref.steps = 20;
  train(ref);
  for (int64_t workers : {0, 2, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    ScratchDir dir;
    TrainConfig c = small_config(dir);
    c.workers = workers;
    c.checkpoint_dir = dir.path("ckpt");
    c.steps = 7;
    train(c);
    c.workers = workers == 0 ? 3 : 0;  // resumed with another count
    c.steps = 20;
    c.resume = true;
    train(c);
    EXPECT_EQ(logged_losses(c.log), logged_losses(ref.log));
    EXPECT_EQ(read_file_bytes(c.save), read_file_bytes(ref.save));
  }
}

TEST(RunTraining, ResumeWithOtherDataOrderSettingsIsRefused) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.checkpoint_dir = dir.path("ckpt");
  c.steps = 2;
  train(c);
  c.resume = true;
  c.steps = 4;
  c.batch_size = 8;
  testing::expect_error<ValueError>([&] { train(c); }, {"batch-size 16", "this run has 8"});
}

TEST(RunTraining, ResumeWithoutACheckpointSaysSo) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.checkpoint_dir = dir.path("empty");
  c.resume = true;
  testing::expect_error<IoError>([&] { train(c); }, {"--resume: no checkpoint in", "empty"});
}

// A data file whose columns do not fit the model fails before training, names both numbers and
// the fix, and leaves an existing --save file (and --log file) exactly as they were.
TEST(RunTraining, DataThatDoesNotFitTheModelFailsAndKeepsExistingFiles) {
  ScratchDir dir;
  write_npy(dir.path("x.npy"), testing::random_tensor({10, 5}, 1));
  write_npy(dir.path("y.npy"), testing::random_tensor({10, 1}, 2));
  TrainConfig c;
  c.model = "mlp:8,16,1";
  c.data = dir.path("x.npy");
  c.targets = dir.path("y.npy");
  c.save = dir.write_raw("w.safetensors", "precious weights");
  c.log = dir.write_raw("m.jsonl", "precious log\n");
  testing::expect_error<ShapeError>(
      [&] { train(c); }, {"5 feature column(s)", "expects 8 inputs", "--model mlp:5,16,1"});
  EXPECT_EQ(read_file_bytes(c.save), "precious weights");
  EXPECT_EQ(read_file_bytes(c.log), "precious log\n");
}

TEST(RunTraining, TargetsThatDoNotFitTheOutputsNameTheFix) {
  ScratchDir dir;
  TrainConfig c;
  c.model = "mlp:8,16,3";
  write_npy(dir.path("x.npy"), testing::random_tensor({10, 8}, 1));
  write_npy(dir.path("y.npy"), testing::random_tensor({10, 2}, 2));
  c.data = dir.path("x.npy");
  c.targets = dir.path("y.npy");
  testing::expect_error<ShapeError>([&] { train(c); }, {"2 target(s)", "3 outputs", "mlp:8,16,2"});
}

// A loss that is not finite at step 1 comes from the initial weights and the data, before any
// update: the message says so instead of blaming the learning rate (kl_div on synthetic data,
// whose targets are negative, is NaN from the first batch).
TEST(RunTraining, ANonFiniteFirstLossBlamesTheDataNotTheLearningRate) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.model = "mlp:4,16,1";
  c.loss = "kl_div";
  testing::expect_error<NonFiniteError>([&] { train(c); },
                                        {"step 1: the loss is", "not the cause", "kl_div"});
  try {
    train(c);
  } catch (const NonFiniteError& e) {
    EXPECT_EQ(std::string(e.what()).find("lower --lr"), std::string::npos) << e.what();
  }
}

// A diverging run stops with the step named, and --save is not written: an existing file stays.
TEST(RunTraining, NonFiniteLossDoesNotWriteSave) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.optimizer = "sgd";
  c.lr = 1e4;
  c.steps = 300;
  c.checkpoint_dir = dir.path("ckpt");
  c.checkpoint_every = 1;
  dir.write_raw("w.safetensors", "precious weights");
  testing::expect_error<NonFiniteError>([&] { train(c); }, {"step ", "try a lower --lr"});
  EXPECT_EQ(read_file_bytes(c.save), "precious weights");
  EXPECT_NO_THROW(read_safetensors(checkpoint_path(c.checkpoint_dir)));
}

TEST(RunTraining, MissingDataFileIsAnIoErrorNamingIt) {
  TrainConfig c;
  c.data = "/nonexistent/x.npy";
  c.targets = "/nonexistent/y.npy";
  testing::expect_error<IoError>([&] { train(c); }, {"/nonexistent/x.npy"});
}

TEST(RunTraining, MoreThreadsOrWorkersThanCoresIsAWarning) {
  for (const char* flag : {"threads", "workers"}) {
    TrainConfig c;
    c.steps = 1;
    int64_t& count = std::string(flag) == "threads" ? c.threads : c.workers;
    count = available_cores() + 3;
    std::string info;
    train(c, &info);
    EXPECT_NE(info.find("warning: --" + std::string(flag) + " " + std::to_string(count) +
                        " is more than the " + std::to_string(available_cores()) + " core(s)"),
              std::string::npos)
        << info;
    count = 1;
    train(c, &info);
    EXPECT_EQ(info.find("warning"), std::string::npos) << info;
  }
}

// A missing directory is made (as --checkpoint-dir's is); one that cannot be made fails before
// training, naming the path.
TEST(RunTraining, SaveMakesItsDirectoryOrFailsBeforeTraining) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.steps = 1;
  c.save = dir.path("runs/a/w.safetensors");
  c.log = dir.path("runs/a/m.jsonl");
  train(c);
  EXPECT_TRUE(std::filesystem::exists(c.save));
  EXPECT_TRUE(std::filesystem::exists(c.log));
  c.save = dir.write_raw("a_file", "x") + "/sub/w.safetensors";  // under a file: no directory
  testing::expect_error<IoError>([&] { train(c); }, {"--save: ", "a_file/sub/w.safetensors"});
}

TEST(RunTraining, UnwritableOutputsFailBeforeTrainingAndStaleTemporariesGo) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.log = "/proc/minitrain-m.jsonl";  // /proc takes no new files, even from root
  testing::expect_error<IoError>([&] { train(c); }, {"--log: ", "/proc/minitrain-m.jsonl"});
  c.log.clear();
  c.checkpoint_dir = "/proc";
  testing::expect_error<IoError>([&] { train(c); },
                                 {"--checkpoint-dir: ", "/proc/checkpoint.safetensors"});
  // A temporary of the checkpoint left by a killed write (pid 2^22 + 1 is above Linux's pid_max).
  c.checkpoint_dir = dir.path("ck");
  std::filesystem::create_directories(c.checkpoint_dir);
  const std::string stale = c.checkpoint_dir + "/.checkpoint.safetensors.tmp.4194305.0";
  write_file_atomically(stale, "half a checkpoint");
  train(c);
  EXPECT_FALSE(std::filesystem::exists(stale));
}

TEST(RunTraining, EpochsSetTheStepCountAndGradAccumDividesIt) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.epochs = 3;      // 90 rows / 16 = 6 batches an epoch: 18 batches
  c.grad_accum = 4;  // 4 steps of 4 batches, then one of 2
  const TrainReport r = train(c);
  EXPECT_EQ(r.total_steps, 5);
  EXPECT_EQ(logged_losses(c.log).size(), 5u);
}

TEST(RunTraining, DropLastDropsEachEpochsPartialBatch) {
  ScratchDir dir;
  TrainConfig c = small_config(dir);
  c.epochs = 3;
  c.drop_last = true;  // 90 rows / 16: 5 full batches an epoch, the 10-row rest dropped
  c.grad_accum = 4;    // 15 batches: steps of 4, 4, 4 and 3
  const TrainReport r = train(c);
  EXPECT_EQ(r.total_steps, 4);
  EXPECT_EQ(r.summary.samples, 15 * 16);
  // A checkpoint of a run without it does not resume with it: the batches would differ.
  TrainConfig first = small_config(dir);
  first.steps = 2;
  first.checkpoint_dir = dir.path("ck");
  train(first);
  TrainConfig resumed = first;
  resumed.resume = true;
  resumed.drop_last = true;
  testing::expect_error<ValueError>([&] { train(resumed); },
                                    {"drop-last false", "this run has true"});
}

}  // namespace
}  // namespace minitrain
