// `minitrain train --precision bf16|fp16` through the library call behind the command: 16-bit
// runs train, fp16's loss scaling follows GradScaler's rule in the log (forced to overflow), its
// state survives a checkpoint bit-exactly, --save-dtype writes 16-bit files that load back, the
// parallel modes take every precision, and settings that do not go together are refused naming
// the flags. The *Cuda suites run the same on (real or emulated) GPUs.

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/device.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "kernels/cast.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

namespace minitrain {
namespace {

using testing::log_lines;
using testing::ScratchDir;

// testing::small_run on 48 rows in file order, batches of 8, 6 epochs: 36 steps, logged.
TrainConfig precision_run(const ScratchDir& dir, const std::string& precision,
                          const std::string& name) {
  TrainConfig c = testing::small_run("cpu", dir.path(name + ".safetensors"));
  c.data = "synthetic:48";
  c.batch_size = 8;
  c.epochs = 6;
  c.shuffle = false;
  c.precision = precision;
  c.log = dir.path(name + ".jsonl");
  return c;
}

std::string train(const TrainConfig& c) {
  std::ostringstream info, progress;
  run_training(c, info, progress);
  return info.str();
}

// The mean loss of the first and of the last `per_epoch` lines: whether the run learned.
std::pair<double, double> first_and_last_epoch(const std::vector<nlohmann::json>& lines,
                                               std::size_t per_epoch) {
  double first = 0, last = 0;
  for (std::size_t i = 0; i < per_epoch; ++i) {
    first += lines[i]["loss"].get<double>();
    last += lines[lines.size() - 1 - i]["loss"].get<double>();
  }
  return {first / double(per_epoch), last / double(per_epoch)};
}

std::vector<double> host(const Tensor& t) { return t.to(Device::cpu()).to_double_vector(); }

// The largest |a - b| over the tensors of two weights files (same names, same order).
double max_difference(const std::string& a, const std::string& b) {
  const SafetensorsFile fa = read_safetensors(a), fb = read_safetensors(b);
  EXPECT_EQ(fa.tensors.size(), fb.tensors.size());
  double worst = 0;
  for (std::size_t i = 0; i < fa.tensors.size() && i < fb.tensors.size(); ++i) {
    EXPECT_EQ(fa.tensors[i].first, fb.tensors[i].first);
    const std::vector<double> x = host(fa.tensors[i].second), y = host(fb.tensors[i].second);
    EXPECT_EQ(x.size(), y.size());
    for (std::size_t j = 0; j < x.size() && j < y.size(); ++j)
      worst = std::max(worst, std::fabs(x[j] - y[j]));
  }
  return worst;
}

// Plain SGD for comparing runs: Adam's m / sqrt(v) turns tiny gradient differences of
// components near zero into whole steps, which would hide how far the runs really are apart.
TrainConfig sgd_run(const ScratchDir& dir, const std::string& precision, const std::string& name) {
  TrainConfig c = precision_run(dir, precision, name);
  c.optimizer = "sgd";
  c.lr = 0.1;
  return c;
}

TEST(PrecisionRun, SixteenBitRunsLearnAndDifferFromFloat32) {
  ScratchDir dir;
  for (const std::string p : {"fp32", "bf16", "fp16"}) {
    const std::string info = train(sgd_run(dir, p, p));
    if (p != "fp32") {
      EXPECT_NE(info.find(p + " mixed precision (float32 master weights"), std::string::npos)
          << info;
    }
    const auto lines = log_lines(dir.path(p + ".jsonl"));
    ASSERT_EQ(lines.size(), 36u);
    const auto [first, last] = first_and_last_epoch(lines, 6);
    EXPECT_LT(last, 0.9 * first) << p;  // measured: 0.409 -> 0.356 in each precision
    EXPECT_EQ(lines.back().contains("loss_scale"), p == "fp16") << lines.back().dump();
    // The master weights stay float32 whatever the precision.
    EXPECT_EQ(read_safetensors(dir.path(p + ".safetensors")).tensors[0].second.dtype(),
              DType::Float32);
  }
  // 16-bit arithmetic shows: neither run is the float32 one, but both stay near it (measured:
  // 1.4e-3 for bf16, 1.3e-3 for fp16, on weights of about 0.5).
  for (const std::string p : {"bf16", "fp16"}) {
    const double d = max_difference(dir.path(p + ".safetensors"), dir.path("fp32.safetensors"));
    EXPECT_GT(d, 1e-4) << p;
    EXPECT_LT(d, 1e-2) << p;
  }
}

TEST(PrecisionRun, Float16ScaleFollowsGradScalersRuleWhenForcedToOverflow) {
  ScratchDir dir;
  TrainConfig c = precision_run(dir, "fp16", "fp16");
  c.loss_scale = std::ldexp(1.0, 28);  // gradients overflow float16 until the scale backs off
  c.loss_scale_growth_interval = 3;
  std::ostringstream info, progress;
  const TrainReport report = run_training(c, info, progress);
  const auto lines = log_lines(c.log);
  ASSERT_EQ(lines.size(), 36u);
  int64_t skipped = 0, finite_in_a_row = 0, grown = 0;
  double expected = std::ldexp(1.0, 28);
  for (const auto& line : lines) {
    const double scale = line["loss_scale"].get<double>();
    EXPECT_EQ(scale, expected) << line.dump();
    const bool skip = line.value("skipped", false);
    skipped += skip;
    EXPECT_EQ(line["skipped_steps"].get<int64_t>(), skipped) << line.dump();
    if (skip) {
      expected = scale * 0.5;
      finite_in_a_row = 0;
    } else if (++finite_in_a_row == 3) {
      expected = scale * 2;
      finite_in_a_row = 0;
      ++grown;
    }
  }
  // 2^28 * max|grad| overflows 65504 for many halvings in a row (the first epoch is all skipped,
  // the weights untouched), then the scale settles, grows every third finite step and overflows
  // again.
  EXPECT_GE(skipped, 10);
  EXPECT_GE(grown, 3);
  // The summary (the command's "loss scale:" line) has the run's skips and the scale it ends at.
  EXPECT_EQ(report.summary.skipped_steps, skipped);
  EXPECT_EQ(report.summary.loss_scale, expected);
  EXPECT_TRUE(lines.front().value("skipped", false));
  const auto [first, last] = first_and_last_epoch(lines, 6);
  EXPECT_LT(last, 0.8 * first) << "the run learns once the scale fits";
}

TEST(PrecisionRun, Float16CheckpointKeepsTheScalerAndResumesBitExactly) {
  ScratchDir dir;
  TrainConfig straight = precision_run(dir, "fp16", "straight");
  straight.loss_scale = std::ldexp(1.0, 20);
  straight.loss_scale_growth_interval = 2;
  train(straight);

  TrainConfig first = straight;
  first.save = dir.path("resumed.safetensors");
  first.log = dir.path("resumed.jsonl");
  first.checkpoint_dir = dir.path("ckpt");
  first.epochs.reset();
  first.steps = 23;  // mid-way through the scale's ups and downs
  train(first);
  TrainConfig second = first;
  second.steps.reset();
  second.epochs = 6;
  second.resume = true;
  train(second);
  EXPECT_EQ(max_difference(dir.path("resumed.safetensors"), dir.path("straight.safetensors")), 0.0);
  const auto a = log_lines(straight.log), b = log_lines(second.log);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["loss"], b[i]["loss"]) << "step " << i + 1;
    EXPECT_EQ(a[i]["loss_scale"], b[i]["loss_scale"]) << "step " << i + 1;
    EXPECT_EQ(a[i]["skipped_steps"], b[i]["skipped_steps"]) << "step " << i + 1;
  }
}

TEST(PrecisionRun, SaveDtypeWritesSixteenBitFilesThatLoadBack) {
  ScratchDir dir;
  TrainConfig c = precision_run(dir, "bf16", "w32");
  train(c);
  for (const auto& [name, dtype, tag] :
       {std::tuple<const char*, DType, const char*>{"bf16", DType::BFloat16, "\"BF16\""},
        {"fp16", DType::Float16, "\"F16\""}}) {
    TrainConfig s = c;
    s.save_dtype = name;
    s.save = dir.path(std::string("w_") + name + ".safetensors");
    train(s);
    EXPECT_NE(read_file_bytes(s.save).find(tag), std::string::npos) << name;
    // Read back (widened to float32): each weight is the float32 run's, rounded to nearest.
    const SafetensorsFile w16 = read_safetensors(s.save), w32 = read_safetensors(c.save);
    ASSERT_EQ(w16.tensors.size(), w32.tensors.size());
    for (std::size_t i = 0; i < w16.tensors.size(); ++i) {
      const std::vector<double> got = host(w16.tensors[i].second);
      const Tensor& full = w32.tensors[i].second;
      const std::vector<double> want = host(cast(full, dtype));
      EXPECT_EQ(got, want) << name << " " << w16.tensors[i].first;
    }
  }
}

TEST(PrecisionRun, ModelParallelOneMicroBatchEqualsOneDeviceBitForBit) {
  // The same layers on the same batch, split over stages: every 16-bit rounding is the same.
  ScratchDir dir;
  for (const std::string p : {"bf16", "fp16"}) {
    train(precision_run(dir, p, "one_" + p));
    TrainConfig c = precision_run(dir, p, "mp_" + p);
    c.parallel = "mp";
    c.stages = 2;
    c.micro_batches = 1;
    c.devices = "cpu,cpu";
    train(c);
    EXPECT_EQ(max_difference(c.save, dir.path("one_" + p + ".safetensors")), 0.0) << p;
    EXPECT_EQ(log_lines(c.log).back()["loss"],
              log_lines(dir.path("one_" + p + ".jsonl")).back()["loss"])
        << p;
  }
}

TEST(PrecisionRun, DataParallelAndMicroBatchesStayWithinSixteenBitRounding) {
  // Replicas (and micro-batches) round their own share of each gradient to 16 bits before the
  // shares are summed in float32, where one device rounds the whole: the runs part by about one
  // 16-bit rounding of the gradients per step, far less than 16-bit arithmetic is from float32.
  // (In float32 the same runs agree to 3e-8.)
  ScratchDir dir;
  train(sgd_run(dir, "fp32", "fp32"));
  for (const std::string p : {"bf16", "fp16"}) {
    train(sgd_run(dir, p, "one_" + p));
    const double from_fp32 =
        max_difference(dir.path("one_" + p + ".safetensors"), dir.path("fp32.safetensors"));
    TrainConfig dp = sgd_run(dir, p, "dp_" + p);
    dp.parallel = "dp";
    dp.replicas = 2;
    const std::string info = train(dp);
    EXPECT_NE(info.find(p + " mixed precision"), std::string::npos) << info;
    TrainConfig mp = sgd_run(dir, p, "mp_" + p);
    mp.parallel = "mp";
    mp.stages = 3;
    mp.micro_batches = 4;
    mp.devices = "cpu,cpu,cpu";
    train(mp);
    for (const TrainConfig* c : {&dp, &mp}) {
      // Measured: a sixth (bf16) to a thirtieth (fp16) of the distance from float32.
      const double d = max_difference(c->save, dir.path("one_" + p + ".safetensors"));
      EXPECT_GT(d, 0.0) << p << " " << c->parallel;
      EXPECT_LT(d, 0.25 * from_fp32) << p << " " << c->parallel;
      const auto got = log_lines(c->log), want = log_lines(dir.path("one_" + p + ".jsonl"));
      ASSERT_EQ(got.size(), want.size());
      // The same skipped steps (fp16): no rank of the run decides alone.
      EXPECT_EQ(got.back().value("skipped_steps", -1), want.back().value("skipped_steps", -1));
    }
  }
}

TEST(PrecisionRun, SettingsThatDoNotGoTogetherAreRefusedNamingTheFlags) {
  ScratchDir dir;
  struct Case {
    std::function<void(TrainConfig&)> set;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](TrainConfig& c) { c.precision = "fp64"; }, "unknown precision 'fp64' (use fp32, bf16"},
      {[](TrainConfig& c) {
         c.precision = "bf16";
         c.loss_scale = 1024;
       },
       "--loss-scale and --loss-scale-growth-interval apply to --precision fp16"},
      {[](TrainConfig& c) {
         c.precision = "fp16";
         c.loss_scale = -1;
       },
       "--loss-scale must be > 0, got -1"},
      {[](TrainConfig& c) {
         c.precision = "fp16";
         c.loss_scale_growth_interval = 0;
       },
       "loss-scale-growth-interval"},
      {[](TrainConfig& c) { c.save_dtype = "int8"; }, "unknown save dtype 'int8'"},
      {[](TrainConfig& c) { c.grad_reduce_dtype = "bf16"; },
       "--grad-reduce-dtype bf16 sets how --parallel ddp all-reduces gradients"},
  };
  for (const Case& k : cases) {
    TrainConfig c = precision_run(dir, "fp32", "bad");
    k.set(c);
    try {
      train(c);
      ADD_FAILURE() << "accepted: expected '" << k.message << "'";
    } catch (const ValueError& e) {
      EXPECT_NE(std::string(e.what()).find(k.message), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::ifstream(c.save).good()) << "a refused run wrote " << c.save;
  }
}

// ---- on GPUs (emulated ones in CI) ----

TEST(PrecisionRunCuda, SixteenBitRunsOnTheGpuStayWithinRoundingOfTheCpu) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  for (const std::string p : {"bf16", "fp16"}) {
    train(sgd_run(dir, p, "cpu_" + p));
    TrainConfig g = sgd_run(dir, p, "gpu_" + p);
    g.device = "cuda";
    const std::string info = train(g);
    EXPECT_NE(info.find(p + " mixed precision"), std::string::npos) << info;
    // The kernels round alike on both devices; only the GEMMs' float32 summation order differs.
    EXPECT_LT(max_difference(g.save, dir.path("cpu_" + p + ".safetensors")), 1e-3) << p;
    const auto a = log_lines(g.log), b = log_lines(dir.path("cpu_" + p + ".jsonl"));
    ASSERT_EQ(a.size(), b.size());
    EXPECT_EQ(a.back().value("skipped_steps", -1), b.back().value("skipped_steps", -1));
  }
}

// The bar: the same run on the (emulated) GPU equals the CPU's. Every 16-bit kernel rounds
// alike on both devices (core/half.h); GEMMs sum in different orders per backend, so the run takes
// the two that sum alike: "reference" on the CPU, the ladder's "naive" on the GPU.
TEST(PrecisionRunCuda, WithInOrderGemmsTheGpuRunIsTheCpuRunBitForBit) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  for (const std::string p : {"bf16", "fp16"}) {
    TrainConfig cpu = precision_run(dir, p, "cpu_" + p);
    cpu.gemm = "reference";
    cpu.loss_scale = p == "fp16" ? std::optional<double>(std::ldexp(1.0, 24)) : std::nullopt;
    train(cpu);
    TrainConfig gpu = cpu;
    gpu.device = "cuda";
    gpu.gemm = "naive";
    gpu.save = dir.path("gpu_" + p + ".safetensors");
    gpu.log = dir.path("gpu_" + p + ".jsonl");
    train(gpu);
    EXPECT_EQ(max_difference(gpu.save, cpu.save), 0.0) << p;
    const auto a = log_lines(gpu.log), b = log_lines(cpu.log);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      // The loss is folded in double in each device's own order: equal to double rounding.
      EXPECT_NEAR(a[i]["loss"].get<double>(), b[i]["loss"].get<double>(),
                  1e-12 * b[i]["loss"].get<double>())
          << p << " step " << i + 1;
      EXPECT_EQ(a[i].value("loss_scale", 0.0), b[i].value("loss_scale", 0.0)) << p << " " << i + 1;
    }
    if (p == "fp16") {
      EXPECT_GT(b.back()["skipped_steps"].get<int64_t>(), 0);
    }
  }
}

TEST(PrecisionRunCuda, BackendsThatCannotTakeThePrecisionAreRefusedNamingThoseThatCan) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig c = precision_run(dir, "fp16", "tc");
  c.device = "cuda";
  c.gemm = "tc_bf16";
  try {
    train(c);
    FAIL() << "tc_bf16 took fp16";
  } catch (const ValueError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--precision: GEMM backend 'tc_bf16' cannot take precision fp16"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("tc_tf32"), std::string::npos) << m;
  }
  c.precision = "bf16";  // tc_bf16 rounds to bfloat16: exact for bf16 inputs
  const std::string info = train(c);
  EXPECT_NE(info.find("GEMM tc_bf16"), std::string::npos) << info;
}

TEST(PrecisionRunCuda, AllowTf32PutsAutoOnTensorCores) {
  SKIP_UNLESS_CUDA();
  ScratchDir dir;
  TrainConfig c = precision_run(dir, "fp32", "tf32");
  c.device = "cuda";
  c.allow_tf32 = true;
  const std::string info = train(c);
  EXPECT_TRUE(info.find("GEMM cublas_tf32 (--allow-tf32)") != std::string::npos ||
              info.find("GEMM tc_tf32 (--allow-tf32)") != std::string::npos)
      << info;
  TrainConfig cpu = precision_run(dir, "fp32", "tf32_cpu");
  cpu.allow_tf32 = true;  // torch's flag changes nothing on the CPU
  EXPECT_EQ(train(cpu).find("GEMM"), std::string::npos);
}

}  // namespace
}  // namespace minitrain
