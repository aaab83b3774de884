// `minitrain train --cuda-graph` through the library call behind the command: on (real or
// emulated) GPUs each step after two eager ones is replayed as one CUDA graph and the run saves
// the eager run's weights bit for bit (Adam with a warm-up and cosine schedule, clipping, a
// partial last batch that takes an eager step), and a classifier's run its log lines too; a step
// that cannot be captured gets a note and eager steps, with the same weights.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/generator.h"
#include "core/npy.h"
#include "core/safetensors.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/readers.h"
#include "nn/cross_entropy_loss.h"
#include "nn/mlp.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"
#include "train/trainer.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::DeviceRun;
using testing::expect_same_weights;
using testing::log_lines;
using testing::run_on_device;
using testing::ScratchDir;
using testing::small_run;  // 15 steps of Adam on batches of 10 and a last one of 5 per epoch

TEST(CudaGraphRun, ReplayedStepsSaveTheEagerRunsWeightsBitForBit) {
  SKIP_UNLESS_CUDA();
  for (const double clip : {0.0, 0.5}) {
    ScratchDir dir;
    TrainConfig eager = small_run("cuda", dir.path("eager.safetensors"));
    eager.schedule = "cosine";
    eager.warmup_steps = 3;
    eager.clip_grad_norm = clip;
    TrainConfig graph = eager;
    graph.save = dir.path("graph.safetensors");
    graph.cuda_graph = true;
    const DeviceRun e = run_on_device(eager), g = run_on_device(graph);
    EXPECT_EQ(g.info.find("--cuda-graph is off"), std::string::npos) << g.info;
    expect_same_weights(graph.save, eager.save);
    if (e.launches >= 0)
      std::cout << "clip " << clip << ": kernel launches of the 15-step run, eager " << e.launches
                << ", --cuda-graph " << g.launches << "\n";
  }
}

// A replayed step's kernel launches, counted on the emulated GPUs as a run of 9 steps minus one of
// 8 (step 9 is a full batch, replayed: steps 1-2 warm up, step 3 is captured, step 5 is partial).
TEST(CudaGraphRun, AReplayedStepMakesAFewLaunchesWhereTheEagerStepMakesMany) {
  SKIP_UNLESS_CUDA();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  int64_t per_step[2] = {0, 0};
  for (const bool graph : {false, true}) {
    TrainConfig c = small_run("cuda", "");
    c.cuda_graph = graph;
    c.epochs.reset();
    c.steps = 8;
    const int64_t eight = run_on_device(c).launches;
    c.steps = 9;
    per_step[graph ? 1 : 0] = run_on_device(c).launches - eight;
  }
  std::cout << "kernel launches of step 9: eager " << per_step[0] << ", replayed " << per_step[1]
            << " (and one graph launch)\n";
  EXPECT_GE(per_step[0], 15);  // 3 Linear layers forward and backward, the loss, Adam
  // the step's factors into device memory, the loss into the device-side totals
  EXPECT_LE(per_step[1], 4);
#endif
}

TEST(CudaGraphRun, AStepThatCannotBeCapturedGetsANoteAndTheEagerBits) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig eager = small_run("cuda", dir.path("eager.safetensors"));
  eager.grad_accum = 2;
  TrainConfig graph = eager;
  graph.save = dir.path("graph.safetensors");
  graph.cuda_graph = true;
  run_on_device(eager);
  const DeviceRun g = run_on_device(graph);
  EXPECT_NE(g.info.find("note: --cuda-graph is off for this run: gradient accumulation runs 2 "
                        "batches per step"),
            std::string::npos)
      << g.info;
  expect_same_weights(graph.save, eager.save);
}

// ---- classifiers: the labels checked and the rows counted inside the graph ----

// mlp:4,16,16,3 on 64 rows of three classes (the argmax of a 3-output synthetic regression), a
// quarter held out: 48 training rows in batches of 10, so four full batches and one of 8 an epoch.
TrainConfig classifier_run(const ScratchDir& dir) {
  TrainConfig c = testing::three_class_run(small_run("cuda", ""), dir);
  c.schedule = "cosine";
  c.warmup_steps = 3;
  return c;
}

// Eager and --cuda-graph: the same log lines (the loss, the accuracy counted on the device, the
// held-out values of every epoch end) and the same saved weights, bit for bit; with label
// smoothing, and with an ignore_index that no training row has.
TEST(CudaGraphRun, AClassifiersReplayedStepsLogAndSaveTheEagerRunsBitForBit) {
  SKIP_UNLESS_CUDA();
  for (const bool smoothed : {false, true}) {
    SCOPED_TRACE(smoothed ? "label smoothing 0.1, ignore_index 7" : "defaults");
    ScratchDir dir;
    TrainConfig eager = classifier_run(dir);
    if (smoothed) {
      eager.loss_settings.label_smoothing = 0.1;
      eager.ignore_index = 7;
    }
    eager.log = dir.path("eager.jsonl");
    eager.save = dir.path("eager.safetensors");
    TrainConfig graph = eager;
    graph.log = dir.path("graph.jsonl");
    graph.save = dir.path("graph.safetensors");
    graph.cuda_graph = true;
    const DeviceRun e = run_on_device(eager), g = run_on_device(graph);
    EXPECT_EQ(g.info.find("--cuda-graph is off"), std::string::npos) << g.info;
    const std::vector<nlohmann::json> want = log_lines(eager.log), got = log_lines(graph.log);
    ASSERT_EQ(got.size(), want.size());
    ASSERT_EQ(got.size(), 15u);
    int evaluations = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i + 1));
      for (const char* key : {"loss", "accuracy", "val_loss", "val_accuracy"}) {
        ASSERT_EQ(got[i].contains(key), want[i].contains(key)) << key;
        if (got[i].contains(key)) {
          EXPECT_EQ(got[i][key].dump(), want[i][key].dump()) << key;
        }
      }
      EXPECT_TRUE(got[i].contains("accuracy"));
      evaluations += got[i].contains("val_loss") ? 1 : 0;
    }
    EXPECT_EQ(evaluations, 3);  // every epoch's end
    expect_same_weights(graph.save, eager.save);
    if (g.launches >= 0) {
      std::cout << "classifier: kernel launches of the 15-step run, eager " << e.launches
                << ", --cuda-graph " << g.launches << "\n";
      // Without a replay the graph run would launch more than the eager one (its capturable
      // optimizer stores each step's factors): fewer launches mean replays.
      EXPECT_LT(g.launches, e.launches) << "the steps were replayed";
    }
  }
}

#if MINITRAIN_CUDA_EMULATED
struct CallCounts {
  int64_t launches = 0, d2h_copies = 0, host_syncs = 0, allocations = 0;
  int64_t loop_d2h_copies = 0, loop_host_syncs = 0;  // the training loop's thread's own
};

CallCounts calls_now() {
  const mtemu::ApiCounts a = mtemu::api_counts(), mine = mtemu::api_counts_of_this_thread();
  auto i = [](uint64_t n) { return static_cast<int64_t>(n); };
  return {i(a.launches),
          i(a.device_to_host_copies),
          i(a.host_syncs),
          i(memory_stats(Device::cuda(0)).allocations),
          i(mine.device_to_host_copies),
          i(mine.host_syncs)};
}

// The calls of a whole run of `steps` steps.
CallCounts run_calls(TrainConfig c, int64_t steps) {
  c.epochs.reset();
  c.steps = steps;
  std::ostringstream info, progress;
  empty_cache(Device::cuda(0));
  const CallCounts before = calls_now();
  run_training(c, info, progress);
  const CallCounts after = calls_now();
  return {after.launches - before.launches,
          after.d2h_copies - before.d2h_copies,
          after.host_syncs - before.host_syncs,
          after.allocations - before.allocations,
          after.loop_d2h_copies - before.loop_d2h_copies,
          after.loop_host_syncs - before.loop_host_syncs};
}
#endif

// A replayed classifier step's runtime calls, as a run of N + 1 steps minus one of N (both end
// with the same reads: the last step's totals and a held-out evaluation): steps 7 to 9 are full
// batches of epoch 2, replayed (1-2 warm up, 3 is captured, 5 is partial and eager). No read by
// the training loop's thread: no device-to-host copy, no blocking sync (the one blocking call a
// step outside the loop is the loader's worker waiting for a pinned staging buffer).
TEST(CudaGraphRun, AReplayedClassifierStepReadsNothingAndAllocatesNothingInTheLoop) {
  SKIP_UNLESS_CUDA();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "runtime calls are counted on the emulated GPUs";
#else
  ScratchDir dir;
  for (const bool graph : {false, true}) {  // eager for the comparison, printed
    TrainConfig c = classifier_run(dir);
    c.cuda_graph = graph;
    c.log = dir.path("log.jsonl");
    c.log_every = 100;
    CallCounts prev = run_calls(c, 6);
    for (int64_t step = 7; step <= 9; ++step) {
      const CallCounts now = run_calls(c, step);
      const int64_t launches = now.launches - prev.launches;
      std::cout << (graph ? "replayed" : "eager") << " classifier step " << step
                << ": kernel launches " << launches << ", device-to-host copies "
                << now.d2h_copies - prev.d2h_copies << ", blocking syncs "
                << now.host_syncs - prev.host_syncs << " (the loop's "
                << now.loop_host_syncs - prev.loop_host_syncs << "), caching-allocator allocations "
                << now.allocations - prev.allocations << "\n";
      if (graph) {
        SCOPED_TRACE("step " + std::to_string(step));
        EXPECT_GE(launches, 1);
        // the step's factors, the loss into the totals (widened and added), the counts and check
        EXPECT_LE(launches, 4);
        EXPECT_EQ(now.d2h_copies - prev.d2h_copies, 0);
        EXPECT_EQ(now.loop_d2h_copies - prev.loop_d2h_copies, 0);
        EXPECT_EQ(now.loop_host_syncs - prev.loop_host_syncs, 0);
        // At most the data loader's worker's two (the batch's x and y, when its kept staging
        // buffers are still held: thread timing), on its own thread. The step itself allocates
        // nothing (CudaGraphStepLoop.ABadLabelInAReplayedStepIsRecordedWithItsRow counts it
        // without a loader).
        EXPECT_LE(now.allocations - prev.allocations, 2);
      }
      prev = now;
    }
  }
#endif
}

// A label that is not a class, met by a replayed step of the library's Trainer (the command
// checks its labels at load), is named with its row when the step's totals are read, in the
// host check's words.
TEST(CudaGraphRun, ABadLabelInAReplayedStepIsNamedWithItsRowWhenRead) {
  SKIP_UNLESS_CUDA();
  const Device gpu = Device::cuda(0);
  std::vector<float> y(16);
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = static_cast<float>(i % 3);
  y[15] = 7;  // step 4's batch (rows 12-15), its row 3
  auto data = std::make_shared<TensorDataset>(testing::random_tensor({16, 4}, 1),
                                              Tensor::from_vector(y, {16}));
  DataLoaderOptions lo;
  lo.batch_size = 4;
  lo.shuffle = false;
  lo.device = gpu;
  DataLoader loader(data, lo);
  Generator gen(7);
  std::unique_ptr<Sequential> model = make_mlp({4, 8, 3}, Activation::Tanh, gen, gpu);
  Adam opt(model->named_parameters(), AdamOptions{});
  TrainerOptions o;
  o.total_steps = 4;
  o.loss = std::make_shared<CrossEntropyLoss>();
  o.every_row_counts = true;
  o.cuda_graph = true;
  Trainer trainer(*model, opt, loader, o);
  testing::expect_error<ValueError>([&] { trainer.run(); },
                                    {"row 3", "has target 7", "C = 3", "ignore_index (-100)"});
  EXPECT_EQ(trainer.graph_replays(), 2);  // steps 3 (captured) and 4
}

// Issue 35: class weights (a 0 among them) and training rows labelled ignore_index no longer keep
// a classifier off the graph (Note [a batch that counts nothing, on the device]): no note, and
// the eager run's weights bit for bit.
TEST(CudaGraphRun, AClassifierWithClassWeightsOrIgnoredRowsIsCaptured) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  write_npy(dir.path("w.npy"), Tensor::from_vector(std::vector<float>{1, 0, 1}, {3}));
  for (const bool weighted : {true, false}) {
    SCOPED_TRACE(weighted ? "class weights 1, 0, 1" : "ignore_index 2");
    TrainConfig eager = classifier_run(dir);
    eager.epochs.reset();
    eager.steps = 5;
    if (weighted) eager.class_weights = dir.path("w.npy");
    if (!weighted) eager.ignore_index = 2;  // a class that training rows have
    eager.save = dir.path("eager.safetensors");
    TrainConfig graph = eager;
    graph.cuda_graph = true;
    graph.save = dir.path("graph.safetensors");
    run_on_device(eager);
    const DeviceRun g = run_on_device(graph);
    EXPECT_EQ(g.info.find("--cuda-graph is off"), std::string::npos) << g.info;
    expect_same_weights(graph.save, eager.save);
  }
}

TEST(GraphRunOption, OnTheCpuIsANoteAndTheEagerBits) {
  ScratchDir dir;
  TrainConfig eager = small_run("cpu", dir.path("eager.safetensors"));
  TrainConfig graph = eager;
  graph.save = dir.path("graph.safetensors");
  graph.cuda_graph = true;
  run_on_device(eager);
  const DeviceRun g = run_on_device(graph);
  EXPECT_NE(g.info.find("note: --cuda-graph is off for this run: a CUDA graph needs a CUDA "
                        "device, not cpu"),
            std::string::npos)
      << g.info;
  expect_same_weights(graph.save, eager.save);
}

}  // namespace
}  // namespace minitrain
