// `minitrain train --parallel dp|mp` through the library call behind the command
// (train/run_training.h): a parallel run saves the weights a one-device run saves, within float32
// rounding, and bad parallel settings are refused with messages that name the flags.

#include <gtest/gtest.h>

#include <sstream>
#include <string>

#include "core/error.h"
#include "core/safetensors.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

// testing::small_run on the CPU in file order: batches of 10 give 10 % 4 != 0 rows per replica,
// and a partial last batch of 5.
TrainConfig unshuffled_run(const std::string& save) {
  TrainConfig c = testing::small_run("cpu", save);
  c.shuffle = false;
  return c;
}

std::string train(const TrainConfig& c) {
  std::ostringstream info, progress;
  run_training(c, info, progress);
  return info.str();
}

// The saved files name the same tensors, in the same order, with values within rounding.
void expect_same_weights_file(const std::string& got, const std::string& want) {
  const SafetensorsFile g = read_safetensors(got), w = read_safetensors(want);
  ASSERT_EQ(g.tensors.size(), w.tensors.size());
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    EXPECT_EQ(g.tensors[i].first, w.tensors[i].first);
    ASSERT_GT(testing::host_max_abs(g.tensors[i].second), 0.0);
    // Sums over replicas/micro-batches vs one GEMM: float32 summation order only (see
    // tests/parallel/data_parallel_test.cpp), over 15 Adam steps.
    EXPECT_ALLCLOSE(g.tensors[i].second, w.tensors[i].second, 1e-6, 1e-5) << g.tensors[i].first;
  }
}

TEST(ParallelCli, DataParallelFourReplicasSavesOneDevicesWeights) {
  ScratchDir dir;
  train(unshuffled_run(dir.path("one.safetensors")));
  TrainConfig c = unshuffled_run(dir.path("dp.safetensors"));
  c.parallel = "dp";
  c.replicas = 4;
  c.devices = "cpu,cpu,cpu,cpu";
  const std::string info = train(c);
  EXPECT_NE(info.find("data parallel: 4 replicas"), std::string::npos) << info;
  expect_same_weights_file(dir.path("dp.safetensors"), dir.path("one.safetensors"));
}

TEST(ParallelCli, DataParallelReplicasDefaultToTheDevice) {
  ScratchDir dir;
  train(unshuffled_run(dir.path("one.safetensors")));
  TrainConfig c = unshuffled_run(dir.path("dp.safetensors"));
  c.parallel = "dp";
  c.replicas = 3;
  const std::string info = train(c);
  EXPECT_NE(info.find("on cpu,cpu,cpu"), std::string::npos) << info;
  expect_same_weights_file(dir.path("dp.safetensors"), dir.path("one.safetensors"));
}

TEST(ParallelCli, ModelParallelThreeStagesFiveMicroBatchesSavesOneDevicesWeights) {
  ScratchDir dir;
  train(unshuffled_run(dir.path("one.safetensors")));
  TrainConfig c = unshuffled_run(dir.path("mp.safetensors"));
  c.parallel = "mp";
  c.stages = 3;
  c.micro_batches = 5;
  c.devices = "cpu,cpu,cpu";
  const std::string info = train(c);
  EXPECT_NE(info.find("model parallel: 3 stages, 5 micro-batches, bubble"), std::string::npos)
      << info;
  expect_same_weights_file(dir.path("mp.safetensors"), dir.path("one.safetensors"));
}

TEST(ParallelCli, BadParallelSettingsAreRefusedNamingTheFlags) {
  struct Case {
    const char* what;
    void (*change)(TrainConfig&);
    const char* expect;
  };
  const Case cases[] = {
      {"dp without replicas", [](TrainConfig& c) { c.parallel = "dp"; },
       "--parallel dp needs --replicas N"},
      {"dp zero replicas", [](TrainConfig& c) { c.parallel = "dp", c.replicas = -1; },
       "--replicas must be >= 1"},
      {"dp replicas vs devices",
       [](TrainConfig& c) { c.parallel = "dp", c.replicas = 3, c.devices = "cpu,cpu"; },
       "--replicas 3 but --devices 'cpu,cpu' names 2 device(s)"},
      {"dp with stages", [](TrainConfig& c) { c.parallel = "dp", c.replicas = 2, c.stages = 2; },
       "--stages go(es) with --parallel mp"},
      {"mp with replicas", [](TrainConfig& c) { c.parallel = "mp", c.replicas = 2; },
       "--replicas goes with --parallel dp"},
      {"mp zero micro-batches", [](TrainConfig& c) { c.parallel = "mp", c.micro_batches = -2; },
       "--micro-batches must be >= 1"},
      {"mp too many stages", [](TrainConfig& c) { c.parallel = "mp", c.stages = 6; },
       "--stages 6 is more than the 5 layer(s)"},
      {"none with devices", [](TrainConfig& c) { c.devices = "cpu"; },
       "--devices given without --parallel"},
      {"empty device entry", [](TrainConfig& c) { c.parallel = "dp", c.devices = "cpu,,cpu"; },
       "an empty entry"},
      {"ddp with replicas", [](TrainConfig& c) { c.parallel = "ddp", c.replicas = 2; },
       "--replicas does not go with --parallel ddp: the ranks come from the launcher"},
  };
  for (const Case& k : cases) {
    TrainConfig c = unshuffled_run("");
    k.change(c);
    const std::string msg = testing::error_message([&] { validate(c); });
    EXPECT_NE(msg.find(k.expect), std::string::npos) << k.what << ": " << msg;
  }
  TrainConfig c = unshuffled_run("");
  c.parallel = "dp";
  c.devices = "cpu,tpu";
  EXPECT_THROW(train(c), DeviceError);
}

// The same runs with the replicas or stages on two GPUs, against the CPU's one-device run: the
// GPU GEMM sums in another order than the CPU's, so float32 rounding over 15 Adam steps (1e-4).
void expect_gpu_run_saves_the_cpu_weights(const std::string& parallel) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  ScratchDir dir;
  train(unshuffled_run(dir.path("one.safetensors")));
  TrainConfig c = unshuffled_run(dir.path("gpu.safetensors"));
  c.parallel = parallel;
  c.devices = "cuda:0,cuda:1";
  if (parallel == "dp") c.replicas = 2;
  if (parallel == "mp") c.micro_batches = 4;
  const std::string info = train(c);
  EXPECT_NE(info.find("cuda:0,cuda:1"), std::string::npos) << info;
  const SafetensorsFile g = read_safetensors(dir.path("gpu.safetensors")),
                        w = read_safetensors(dir.path("one.safetensors"));
  ASSERT_EQ(g.tensors.size(), w.tensors.size());
  for (std::size_t i = 0; i < g.tensors.size(); ++i)
    EXPECT_ALLCLOSE(g.tensors[i].second, w.tensors[i].second, 1e-5, 1e-4) << g.tensors[i].first;
}

TEST(ParallelCliCuda, DataParallelOnTwoGpusSavesTheCpuRunsWeights) {
  expect_gpu_run_saves_the_cpu_weights("dp");
}

// The targets arrive on the first stage's GPU and the prediction leaves the last stage's.
TEST(ParallelCliCuda, ModelParallelOnTwoGpusFourMicroBatchesSavesTheCpuRunsWeights) {
  expect_gpu_run_saves_the_cpu_weights("mp");
}

}  // namespace
}  // namespace minitrain
