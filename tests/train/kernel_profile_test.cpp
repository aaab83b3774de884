// `minitrain train --profile-kernels FILE` (train/kernel_profile.h) through the library call
// behind the command, on the CPU and on a GPU (real or emulated): a row per op and step whose
// times, with the "(outside any op)" row, sum to the step; a summary ranked by share; the same
// weights as without profiling; and the file checked against the run's other files.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "train/run_training.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

class KernelProfileRun : public testing::DeviceTest {
 protected:
  // testing::small_run with one hidden layer for 2 epochs: 10 steps.
  TrainConfig profile_run(const ScratchDir& dir, const std::string& name) const {
    TrainConfig c = testing::small_run(device().str(), dir.path(name + ".safetensors"));
    c.model = "mlp:4,16,2";
    c.epochs = 2;
    return c;
  }
  static std::string train(const TrainConfig& c) {
    std::ostringstream info, progress;
    run_training(c, info, progress);
    return info.str();
  }
};

TEST_P(KernelProfileRun, RowsOfEveryStepSumToTheStepAndTheSummaryRanksTheOps) {
  ScratchDir dir;
  TrainConfig c = profile_run(dir, "w");
  c.profile_kernels = dir.path("profile.jsonl");
  const std::string info = train(c);
  EXPECT_NE(info.find("kernel profile: 10 step(s)"), std::string::npos) << info;
  EXPECT_NE(info.find("(outside any op)"), std::string::npos) << info;

  std::istringstream lines(read_file_bytes(c.profile_kernels));
  std::map<int64_t, double> step_ms, rows_ms;  // rows_ms: the host's rows (CPU ops + outside)
  std::set<std::string> ops;
  nlohmann::json summary;
  for (std::string line; std::getline(lines, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    ASSERT_TRUE(summary.is_null()) << "a line after the summary: " << line;
    if (j.contains("summary")) {
      summary = j["summary"];
      continue;
    }
    const int64_t step = j.at("step");
    const std::string op = j.at("op"), dev = j.at("device");
    if (op != "(outside any op)") {
      EXPECT_EQ(dev, device().str()) << line;
      EXPECT_GE(j.at("calls").get<int64_t>(), 1) << line;
      ops.insert(op);
    }
    if (dev == "cpu") rows_ms[step] += j.at("ms").get<double>();
    step_ms[step] = j.at("step_ms");
    const std::string timing = j.at("timing");
    if (dev == "cpu")
      EXPECT_EQ(timing, "host clock") << line;
    else
      EXPECT_NE(timing.find("events"), std::string::npos) << line;
  }
  ASSERT_EQ(step_ms.size(), 10u);
  EXPECT_EQ(step_ms.begin()->first, 1);
  for (const auto& [step, ms] : step_ms)  // the outside row is what the host's ops leave
    EXPECT_NEAR(rows_ms[step], ms, 1e-6 * std::max(1.0, ms)) << "step " << step;
  for (const char* op : {"linear_forward", "linear_weight_grad", "adam_step_multi"})
    EXPECT_EQ(ops.count(op), 1u) << op << " missing; ops: " << nlohmann::json(ops).dump();
  // The hidden layer's activation: in the GEMM's epilogue where the device fuses it (the CPU),
  // else its own op.
  EXPECT_EQ(ops.count("linear_activation_forward") + ops.count("activation_forward"), 1u)
      << nlohmann::json(ops).dump();

  ASSERT_FALSE(summary.is_null());
  EXPECT_EQ(summary.at("steps"), 10);
  const nlohmann::json& top = summary.at("top");
  ASSERT_EQ(top.size(), ops.size());
  for (std::size_t i = 1; i < top.size(); ++i)
    EXPECT_GE(top[i - 1].at("ms_per_step").get<double>(), top[i].at("ms_per_step").get<double>());
}

TEST_P(KernelProfileRun, TheWeightsAreTheSameWithAndWithoutProfiling) {
  ScratchDir dir;
  TrainConfig plain = profile_run(dir, "plain"), profiled = profile_run(dir, "profiled");
  profiled.profile_kernels = dir.path("p.jsonl");
  train(plain);
  train(profiled);
  EXPECT_EQ(read_file_bytes(plain.save), read_file_bytes(profiled.save));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(KernelProfileRun);

// The profile is an output like --log: it may not be another output or an input, under any
// spelling, and nothing is written when it is.
TEST(KernelProfileFiles, AProfileThatIsTheLogOrTheDataIsRefusedBeforeAnythingIsWritten) {
  ScratchDir dir;
  TrainConfig c;
  c.model = "mlp:4,8,2";
  c.data = "synthetic:20";
  c.device = "cpu";
  c.progress = "none";
  c.epochs = 1;
  c.log = dir.path("m.jsonl");
  c.profile_kernels = dir.path("./m.jsonl");
  std::ostringstream info, progress;
  try {
    run_training(c, info, progress);
    FAIL() << "the profile was allowed to be the log";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--profile-kernels"), std::string::npos) << m;
    EXPECT_NE(m.find("--log"), std::string::npos) << m;
  }
  EXPECT_FALSE(std::filesystem::exists(c.log));

  const std::string data = dir.path("d.csv");
  write_file_atomically(data, "a,b,y\n1,2,3\n4,5,6\n");
  c.log.clear();
  c.model = "mlp:2,4,1";
  c.data = data;
  c.target_columns = {"y"};
  c.profile_kernels = dir.path("sub/../d.csv");
  std::filesystem::create_directories(dir.path("sub"));
  EXPECT_THROW(run_training(c, info, progress), IoError);
  EXPECT_EQ(read_file_bytes(data), "a,b,y\n1,2,3\n4,5,6\n");
}

}  // namespace
}  // namespace minitrain
