// `minitrain train --device cuda` through the library call behind the command, on real or
// emulated GPUs: every CUDA GEMM backend saves the CPU run's weights within its rounding, a run
// checkpointed and resumed on the GPU saves what one straight run saves, and a memory cap too
// small for the model stops with an out-of-memory error that names the cap and the device.

#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/gpu_monitor.h"
#include "core/safetensors.h"
#include "kernels/gemm/gemm_registry.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

namespace minitrain {
namespace {

using testing::ScratchDir;
using testing::small_run;  // 15 steps of Adam, shuffled

std::string train(const TrainConfig& c) {
  std::ostringstream info, progress;
  run_training(c, info, progress);
  return info.str();
}

void expect_weights_close(const std::string& got, const std::string& want, double atol,
                          double rtol) {
  const SafetensorsFile g = read_safetensors(got), w = read_safetensors(want);
  ASSERT_EQ(g.tensors.size(), w.tensors.size());
  for (std::size_t i = 0; i < g.tensors.size(); ++i) {
    EXPECT_EQ(g.tensors[i].first, w.tensors[i].first);
    EXPECT_ALLCLOSE(g.tensors[i].second, w.tensors[i].second, atol, rtol) << g.tensors[i].first;
  }
}

// Float32 ladder kernels differ from the CPU's GEMM by summation order only (rtol 1e-4 over 15
// steps). TF32 keeps 10 mantissa bits and BF16 7, so their runs are compared at their rounding.
// SGD with momentum, not Adam: Adam divides by the gradient's own size, so a gradient near zero
// whose sign the rounding flips moves its weight by a whole lr, which compares nothing.
TEST(RunTrainingCuda, EveryCudaGemmSavesTheCpuRunsWeights) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  auto sgd_run = [](const std::string& device, const std::string& save) {
    TrainConfig c = small_run(device, save);
    c.optimizer = "sgd";
    c.lr = 0.05;
    c.momentum = 0.9;
    return c;
  };
  train(sgd_run("cpu", dir.path("cpu.safetensors")));
  const std::vector<std::string> names = gemm_backend_names(DeviceType::CUDA);
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE("--gemm " + name);
    TrainConfig c = sgd_run("cuda", dir.path(name + ".safetensors"));
    c.gemm = name;
    train(c);
    const bool bf16 = name.find("bf16") != std::string::npos;
    const double rtol = !gemm_backend(name).reduced_precision_inputs ? 1e-4 : bf16 ? 5e-2 : 1e-2;
    expect_weights_close(dir.path(name + ".safetensors"), dir.path("cpu.safetensors"),
                         10 * rtol * 1e-2, rtol);
  }
}

// 15 steps straight, against 5 steps with a checkpoint then --resume to the end, all on cuda:0.
// The same kernels on the same data in the same order: the files are byte-identical.
TEST(RunTrainingCuda, ResumedRunSavesWhatOneStraightRunSaves) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  train(small_run("cuda", dir.path("straight.safetensors")));
  TrainConfig c = small_run("cuda", dir.path("resumed.safetensors"));
  c.checkpoint_dir = dir.path("ckpt");
  c.epochs.reset();
  c.steps = 5;
  train(c);
  c.steps = 15;
  c.resume = true;
  const std::string info = train(c);
  EXPECT_NE(info.find("resuming after step 5"), std::string::npos) << info;
  const SafetensorsFile a = read_safetensors(dir.path("straight.safetensors")),
                        b = read_safetensors(dir.path("resumed.safetensors"));
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i)
    EXPECT_EQ(testing::tensor_bytes(a.tensors[i].second),
              testing::tensor_bytes(b.tensors[i].second))
        << a.tensors[i].first;
}

// GPU utilisation and memory come from NVML; where it cannot be read (the emulated GPUs, a machine
// without the driver's libnvidia-ml) the run says why once, its log has no GPU fields, and it
// trains all the same. Where NVML reads, every line has them.
TEST(RunTrainingCuda, MetricsCarryGpuUsageOrTheRunSaysOnceWhyNot) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig c = small_run("cuda:0", dir.path("w.safetensors"));
  c.log = dir.path("m.jsonl");
  const std::string info = train(c);
  const std::string log = read_file_bytes(c.log);
  EXPECT_NE(log.find("\"cpu_utilization\":"), std::string::npos) << log;
  const std::string reason = nvml_unavailable_reason();
  const std::string note = "note: the metrics leave out GPU utilisation and memory: ";
  if (reason.empty()) {
    EXPECT_EQ(info.find(note), std::string::npos) << info;
    std::istringstream lines(log);
    for (std::string line; std::getline(lines, line);)
      for (const char* key : {"\"gpu_utilization_pct\":", "\"gpu_memory_used_bytes\":",
                              "\"gpu_memory_total_bytes\":"})
        EXPECT_NE(line.find(key), std::string::npos) << key << " missing in " << line;
    return;
  }
  const std::size_t at = info.find(note + reason + "\n");
  ASSERT_NE(at, std::string::npos) << info;
  EXPECT_EQ(info.find(note, at + 1), std::string::npos) << "said more than once: " << info;
  EXPECT_EQ(log.find("gpu_"), std::string::npos) << log;
  EXPECT_TRUE(std::filesystem::exists(c.save));
  // Without --log there are no metrics to leave anything out of: nothing to say.
  c.log.clear();
  EXPECT_EQ(train(c).find(note), std::string::npos);
}

// A 512-wide layer's 1 MiB of weights under a 256 KiB cap: OutOfMemory before the first step,
// naming the device and the cap, and no weights file.
TEST(RunTrainingCuda, MemoryCapTooSmallForTheModelIsAnOutOfMemoryErrorNamingTheCap) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig c = small_run("cuda:0", dir.path("w.safetensors"));
  c.model = "mlp:4,512,512,2";
  c.memory_cap = "256KiB";
  std::string msg;
  try {
    train(c);
  } catch (const OutOfMemory& e) {
    msg = e.what();
  }
  set_memory_cap(Device::cuda(0), 0);  // the cap is the process's: lift it for what follows
  EXPECT_NE(msg.find("cuda:0: out of memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cap 256.00 KiB"), std::string::npos) << msg;
  EXPECT_FALSE(std::filesystem::exists(dir.path("w.safetensors")));
}

}  // namespace
}  // namespace minitrain
