// `minitrain train --mlp-kernel fused` on the emulated GPUs: the kernel launches of a training
// step of mlp:4,64,64,1 (MSE + Adam, the model), counted by the emulator's runtime
// counters (cuda_emu/api_counts.h) against the layer-by-layer step, and 9 steps that save the
// same weights, bit for bit, as the layers with the GEMM backend whose sums run in the fused
// kernels' order ("naive").

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

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

TrainConfig step_config(const std::string& mlp_kernel) {
  TrainConfig c = testing::step_run("mlp:4,64,64,1");
  c.mlp_kernel = mlp_kernel;
  return c;
}

#if MINITRAIN_CUDA_EMULATED
// The kernel launches of a run of `steps` steps.
int64_t launches_of_run(TrainConfig c, int64_t steps) {
  c.steps = steps;
  c.epochs.reset();
  return testing::run_on_device(c).launches;
}
#endif

TEST(CudaFusedMlpStep, AtMostEightLaunchesPerStepForThreeLayers) {
  SKIP_UNLESS_CUDA();
#if !MINITRAIN_CUDA_EMULATED
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#else
  std::vector<int64_t> per_step;
  for (const char* kernel : {"layers", "fused"}) {
    const TrainConfig c = step_config(kernel);
    // Step 4 alone (past the warm-up): the difference of runs of 3 and 4 steps.
    per_step.push_back(launches_of_run(c, 4) - launches_of_run(c, 3));
  }
  std::cout << "kernel launches per step, mlp:4,64,64,1 MSE + Adam: layers " << per_step[0]
            << ", fused " << per_step[1] << "\n";
  EXPECT_LE(per_step[1], 8);
  EXPECT_LT(per_step[1], per_step[0]);
#endif
}

TEST(CudaFusedMlpStep, NineStepsSaveTheWeightsOfTheLayersWithTheNaiveGemm) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  for (const char* kernel : {"layers", "fused"}) {
    TrainConfig c = step_config(kernel);
    c.gemm = "naive";  // the fused kernels ignore it; the layers sum in their order with it
    c.steps = 9;
    c.epochs.reset();
    c.save = dir.path(std::string(kernel) + ".safetensors");
    testing::run_on_device(c);
  }
  testing::expect_same_weights(dir.path("fused.safetensors"), dir.path("layers.safetensors"));
}

// On the CPU, `--mlp-kernel fused` runs the twin: outputs and weight gradients with the bits of
// `--gemm reference`, bias gradients within a float ulp (docs/fused_mlp.md, Bits), so 9 steps
// end within float rounding of the reference's weights.
TEST(FusedMlpStep, NineCpuStepsEndAtTheWeightsOfTheReferenceGemm) {
  ScratchDir dir;
  std::vector<SafetensorsFile> saved;
  for (const char* kernel : {"layers", "fused"}) {
    TrainConfig c = step_config(kernel);
    c.device = "cpu";
    c.gemm = "reference";
    c.steps = 9;
    c.epochs.reset();
    c.save = dir.path(std::string(kernel) + ".safetensors");
    std::ostringstream info, progress;
    run_training(c, info, progress);
    saved.push_back(read_safetensors(c.save));
  }
  ASSERT_EQ(saved[0].tensors.size(), saved[1].tensors.size());
  for (std::size_t i = 0; i < saved[0].tensors.size(); ++i) {
    ASSERT_GT(testing::host_max_abs(saved[1].tensors[i].second), 0.0);
    EXPECT_ALLCLOSE(testing::host_values(saved[1].tensors[i].second),
                    testing::host_values(saved[0].tensors[i].second), 1e-6, 1e-5)
        << saved[0].tensors[i].first;
  }
}

}  // namespace
}  // namespace minitrain
