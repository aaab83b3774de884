// `minitrain train --cuda-graph` through the library call behind the command: on (real or
// emulated) GPUs each step after two eager ones is replayed as one CUDA graph and the run saves
// the eager run's weights bit for bit (Adam with a warm-up and cosine schedule, clipping, a
// partial last batch that takes an eager step); a step that cannot be captured gets a note and
// eager steps, with the same weights.

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>

#include "core/allocator.h"
#include "core/safetensors.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::ScratchDir;
using testing::small_run;  // 15 steps of Adam on batches of 10 and a last one of 5 per epoch

struct TrainedRun {
  std::string info;
  int64_t launches = -1;  // kernel launches of the whole run (emulated GPUs only)
};

TrainedRun train_run(const TrainConfig& c) {
  std::ostringstream info, progress;
  if (c.device != "cpu") empty_cache(Device::cuda(0));
  TrainedRun r;
#if MINITRAIN_CUDA_EMULATED
  const uint64_t before = mtemu::api_counts().launches;
#endif
  run_training(c, info, progress);
#if MINITRAIN_CUDA_EMULATED
  r.launches = static_cast<int64_t>(mtemu::api_counts().launches - before);
#endif
  r.info = info.str();
  return r;
}

// The saved tensors, bit for bit (the files' metadata differ: it records the config).
void expect_same_weights(const std::string& got_path, const std::string& want_path) {
  const SafetensorsFile got = read_safetensors(got_path), want = read_safetensors(want_path);
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (std::size_t i = 0; i < got.tensors.size(); ++i) {
    EXPECT_EQ(got.tensors[i].first, want.tensors[i].first);
    ASSERT_GT(testing::host_max_abs(got.tensors[i].second), 0.0);  // not silently zero
    EXPECT_EQ(testing::tensor_bytes(got.tensors[i].second),
              testing::tensor_bytes(want.tensors[i].second))
        << got.tensors[i].first << " of " << got_path << " differs from " << want_path;
  }
}

#define SKIP_UNLESS_CUDA() \
  if (cuda_device_count() < 1) GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason()

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
    const TrainedRun e = train_run(eager), g = train_run(graph);
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
    const int64_t eight = train_run(c).launches;
    c.steps = 9;
    per_step[graph ? 1 : 0] = train_run(c).launches - eight;
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
  train_run(eager);
  const TrainedRun g = train_run(graph);
  EXPECT_NE(g.info.find("note: --cuda-graph is off for this run: gradient accumulation runs 2 "
                        "batches per step"),
            std::string::npos)
      << g.info;
  expect_same_weights(graph.save, eager.save);
}

TEST(GraphRunOption, OnTheCpuIsANoteAndTheEagerBits) {
  ScratchDir dir;
  TrainConfig eager = small_run("cpu", dir.path("eager.safetensors"));
  TrainConfig graph = eager;
  graph.save = dir.path("graph.safetensors");
  graph.cuda_graph = true;
  train_run(eager);
  const TrainedRun g = train_run(graph);
  EXPECT_NE(g.info.find("note: --cuda-graph is off for this run: a CUDA graph needs a CUDA "
                        "device, not cpu"),
            std::string::npos)
      << g.info;
  expect_same_weights(graph.save, eager.save);
}

}  // namespace
}  // namespace minitrain
