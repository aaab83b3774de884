// `minitrain train --precision fp16 --cuda-graph` (docs/cuda_graph.md, "float16 loss scaling in
// the graph"): the mixed-precision step with dynamic loss scaling captured as one CUDA graph (the
// loss gradient times the device's scale, the unscale writing the inf flag, clipping, the
// optimizer skipping on the flag, the scale's update) replays the eager fp16 run's log lines and
// weights bit for bit, steps whose gradients overflow included; a replayed step reads nothing
// back and allocates nothing. bf16 (no scaling) is captured too.

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/allocator.h"
#include "core/safetensors.h"
#include "nn/mse_loss.h"
#include "optim/grad_scaler.h"
#include "optim/optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/graph_step.h"
#include "train/run_training.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::expect_same_weights;
using testing::log_lines;
using testing::run_on_device;
using testing::ScratchDir;

// The 15-step small run (3 epochs of batches of 10 and a partial one of 5: steps 5, 10 and 15 are
// eager), fp16 with a loss scale of 2^17 that grows every 2 finite steps: mlp:4,16,16,2's scaled
// gradients overflow float16 at 2^17 and not at 2^16, so the run keeps overflowing, backing off
// and growing again, in replayed steps too.
TrainConfig fp16_run(const std::string& save, const std::string& log) {
  TrainConfig c = testing::small_run("cuda", save);
  c.precision = "fp16";
  c.loss_scale = 131072.0;
  c.loss_scale_growth_interval = 2;
  c.schedule = "cosine";
  c.warmup_steps = 3;
  c.log = log;
  c.log_every = 1;
  return c;
}

TEST(CudaGraphFp16Run, ReplaysTheEagerRunsLogLinesAndWeightsWithSkippedStepsBitForBit) {
  SKIP_UNLESS_CUDA();
  for (const double clip : {0.0, 0.5}) {
    SCOPED_TRACE("clip " + std::to_string(clip));
    ScratchDir dir;
    TrainConfig eager = fp16_run(dir.path("eager.safetensors"), dir.path("eager.jsonl"));
    eager.clip_grad_norm = clip;
    TrainConfig graph = eager;
    graph.save = dir.path("graph.safetensors");
    graph.log = dir.path("graph.jsonl");
    graph.cuda_graph = true;
    run_on_device(eager);
    const std::string info = run_on_device(graph).info;
    EXPECT_EQ(info.find("--cuda-graph is off"), std::string::npos) << info;
    expect_same_weights(graph.save, eager.save);
    const std::vector<nlohmann::json> want = log_lines(eager.log), got = log_lines(graph.log);
    ASSERT_EQ(got.size(), 15u);
    ASSERT_EQ(got.size(), want.size());
    int64_t skipped_replayed = 0, taken_replayed = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE("step " + std::to_string(i + 1));
      for (const char* key : {"step", "loss", "loss_scale", "skipped_steps", "lr"}) {
        ASSERT_TRUE(want[i].contains(key)) << key << " in " << want[i].dump();
        EXPECT_EQ(got[i].at(key), want[i].at(key)) << key;
      }
      const bool skipped = want[i].value("skipped", false);  // written only when true
      EXPECT_EQ(got[i].value("skipped", false), skipped);
      EXPECT_EQ(got[i].contains("grad_norm"), want[i].contains("grad_norm"));
      if (want[i].contains("grad_norm")) {
        EXPECT_EQ(got[i].at("grad_norm"), want[i].at("grad_norm"));
      }
      const int64_t step = static_cast<int64_t>(i) + 1;
      if (step >= 3 && step % 5 != 0)  // captured at step 3; partial batches are eager
        ++(skipped ? skipped_replayed : taken_replayed);
    }
    std::cout << "clip " << clip << ": replayed steps skipped " << skipped_replayed << ", taken "
              << taken_replayed << "; skipped_steps " << want.back().at("skipped_steps") << "\n";
    EXPECT_GT(skipped_replayed, 0) << "no replayed step overflowed: the test proves nothing";
    EXPECT_GT(taken_replayed, 0);
  }
}

TEST(CudaGraphFp16Run, Bf16ReplaysTheEagerRunsWeightsBitForBit) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig eager = testing::small_run("cuda", dir.path("eager.safetensors"));
  eager.precision = "bf16";
  eager.log = dir.path("eager.jsonl");
  TrainConfig graph = eager;
  graph.save = dir.path("graph.safetensors");
  graph.log = dir.path("graph.jsonl");
  graph.cuda_graph = true;
  run_on_device(eager);
  const std::string info = run_on_device(graph).info;
  EXPECT_EQ(info.find("--cuda-graph is off"), std::string::npos) << info;
  expect_same_weights(graph.save, eager.save);
  const std::vector<nlohmann::json> want = log_lines(eager.log), got = log_lines(graph.log);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i].at("loss"), want[i].at("loss"));
}

#if MINITRAIN_CUDA_EMULATED
struct Counts {
  int64_t launches = 0, d2h = 0, loop_syncs = 0, loop_d2h = 0, allocations = 0;
};

// The runtime calls of a whole run of `steps` steps (the loop's thread's own for the syncs).
Counts run_counts(TrainConfig c, int64_t steps) {
  c.steps = steps;
  c.epochs.reset();
  empty_cache(Device::cuda(0));
  const mtemu::ApiCounts a = mtemu::api_counts(), mine = mtemu::api_counts_of_this_thread();
  const uint64_t allocations = memory_stats(Device::cuda(0)).allocations;
  std::ostringstream info, progress;
  run_training(c, info, progress);
  const mtemu::ApiCounts b = mtemu::api_counts(), mine_b = mtemu::api_counts_of_this_thread();
  auto d = [](uint64_t after, uint64_t before) { return static_cast<int64_t>(after - before); };
  return {d(b.launches, a.launches), d(b.device_to_host_copies, a.device_to_host_copies),
          d(mine_b.host_syncs, mine.host_syncs),
          d(mine_b.device_to_host_copies, mine.device_to_host_copies),
          d(memory_stats(Device::cuda(0)).allocations, allocations)};
}
#endif

// A replayed step's calls, as a run of n+1 steps minus one of n (steps 7 to 9: full batches,
// replayed), with the log every 100 steps and clipping: no copy back, no blocking call of the
// loop, a few launches besides the graph (the optimizer's factors, the loss into the device-side
// totals) where the eager fp16 step makes about 100. The step allocates nothing: the two
// allocations a step counts are the data loader's worker's next batch (x and y on the device),
// which a replayed float32 step counts too.
TEST(CudaGraphFp16Run, AReplayedStepReadsNothingBackAndAllocatesNothing) {
  SKIP_UNLESS_CUDA();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "calls are counted on the emulated GPUs";
#else
  ScratchDir dir;
  struct Column {
    const char* name;
    const char* precision;
    bool graph;
    std::vector<Counts> steps;
  };
  std::vector<Column> columns{{"eager fp16", "fp16", false, {}},
                              {"replayed fp32", "fp32", true, {}},
                              {"replayed fp16", "fp16", true, {}}};
  for (Column& col : columns) {
    TrainConfig c = fp16_run("", dir.path("log.jsonl"));
    c.precision = col.precision;
    if (c.precision != "fp16") c.loss_scale.reset(), c.loss_scale_growth_interval.reset();
    c.log_every = 100;
    c.clip_grad_norm = 0.5;
    c.cuda_graph = col.graph;
    Counts prev = run_counts(c, 6);
    for (int64_t step = 7; step <= 9; ++step) {
      const Counts now = run_counts(c, step);
      const Counts s{now.launches - prev.launches, now.d2h - prev.d2h,
                     now.loop_syncs - prev.loop_syncs, now.loop_d2h - prev.loop_d2h,
                     now.allocations - prev.allocations};
      prev = now;
      col.steps.push_back(s);
      std::cout << col.name << " step " << step << ": " << s.launches << " launches, " << s.d2h
                << " device-to-host copies, " << s.loop_syncs << " blocking calls of the loop, "
                << s.allocations << " allocations\n";
      EXPECT_EQ(s.d2h, 0) << col.name << " step " << step;
      EXPECT_EQ(s.loop_d2h, 0) << col.name << " step " << step;
      EXPECT_EQ(s.loop_syncs, 0) << col.name << " step " << step;
    }
  }
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_GE(columns[0].steps[k].launches, 30);  // 33 since the GEMMs take 16-bit operands
    EXPECT_LE(columns[2].steps[k].launches, 4) << "fp16 step " << k + 7 << " was not replayed";
    // The replayed step allocates nothing; what is counted is the data loader's worker
    // preparing a batch ahead on its own thread (0 to 2, by thread timing, as in a replayed
    // float32 step). The eager step's own are the clipping norm's scratch (2).
    EXPECT_LE(columns[2].steps[k].allocations, 2);
    EXPECT_LE(columns[1].steps[k].allocations, 2);
  }
#endif
}

// Where the scaler cannot stay on the device (several ranks, parameters on several devices: the
// Trainer then keeps it on the host), or the optimizer does not skip on its flag, the step is not
// captured, and graph_step_unsupported says why.
TEST(CudaGraphFp16Run, AScalerThatDecidesOnTheHostIsNamed) {
  SKIP_UNLESS_CUDA();
  const Device gpu = Device::cuda(0);
  Parameter p;
  p.value = Tensor::zeros({2}, DType::Float32, gpu);
  Adam adam({{"w", &p}}, AdamOptions{});
  MSELoss loss;
  GradScaler scaler;
  GraphStepOptions o;
  o.scaler = &scaler;
  EXPECT_NE(graph_step_unsupported(loss, adam, gpu, o)
                .find("float16 loss scaling decides on the host whether to step"),
            std::string::npos);
  scaler.keep_on_device(gpu);
  EXPECT_NE(graph_step_unsupported(loss, adam, gpu, o)
                .find("the optimizer does not skip on the loss scaler's inf flag"),
            std::string::npos);
  adam.set_found_inf(scaler.found_inf());
  EXPECT_EQ(graph_step_unsupported(loss, adam, gpu, o), "");
}

}  // namespace
}  // namespace minitrain
