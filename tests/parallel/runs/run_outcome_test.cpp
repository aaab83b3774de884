// The pipelines summary compares runs by their last epoch's mean loss and their held-out numbers,
// read from the metrics log; the best run is the one with the lowest val_loss.

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel/runs/run_outcome.h"
#include "parallel/runs/run_scheduler.h"
#include "tests/core/io_test_util.h"
#include "tools/runs_table.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

TEST(RunOutcome, EpochMeanWeighsIntervalLinesAndValidationKeepsLastAndBest) {
  ScratchDir dir;
  const std::string log = dir.write_raw(
      "m.jsonl",
      "{\"step\":1,\"epoch\":1,\"loss\":9}\n"
      "{\"step\":2,\"epoch\":2,\"loss\":4,\"accuracy\":0.5,\"val_loss\":3,\"val_accuracy\":0.6}\n"
      "{\"step\":5,\"steps\":3,\"epoch\":2,\"loss\":2,\"accuracy\":0.9,\"val_loss\":1.5}\n"
      "{\"step\":6,\"epoch\":2,\"loss\":1,\"accuracy\":1,\"val_loss\":2,\"val_accuracy\":0.7}\n"
      "{\"step\":7,\"epo");  // a torn last line is skipped
  const RunOutcome o = read_run_outcome(log);
  EXPECT_EQ(o.epoch, 2);
  EXPECT_DOUBLE_EQ(*o.epoch_loss, (4 + 3 * 2 + 1) / 5.0);  // the interval line counts 3 steps
  EXPECT_DOUBLE_EQ(*o.epoch_accuracy, (0.5 + 3 * 0.9 + 1) / 5.0);
  EXPECT_DOUBLE_EQ(*o.val_loss, 2);
  EXPECT_DOUBLE_EQ(*o.val_accuracy, 0.7);
  EXPECT_DOUBLE_EQ(*o.best_val_loss, 1.5);
  EXPECT_EQ(o.best_step, 5);
  EXPECT_FALSE(read_run_outcome(dir.path("missing.jsonl")).epoch_loss.has_value());
}

RunResult run(const std::string& name, double epoch_loss, std::optional<double> best_val) {
  RunResult r;
  r.name = name;
  r.state = RunState::Done;
  r.final_loss = 0.001;  // one small last batch: not what the runs are compared by
  r.outcome.epoch_loss = epoch_loss;
  r.outcome.best_val_loss = best_val;
  return r;
}

TEST(RunOutcome, TheBestRunIsTheLowestValLossNotTheLowestTrainingLoss) {
  std::vector<RunResult> runs{run("overfit", 0.006, 0.88), run("fair", 0.3, 0.52)};
  const nlohmann::json j = nlohmann::json::parse(runs_summary_json(runs));
  EXPECT_EQ(j["best_run"]["name"], "fair");
  EXPECT_EQ(j["best_run"]["by"], "best_val_loss");
  EXPECT_DOUBLE_EQ(j["runs"][0]["epoch_loss"].get<double>(), 0.006);
  EXPECT_NE(runs_summary_table(runs).find("best: fair (lowest val_loss, 0.52)"), std::string::npos)
      << runs_summary_table(runs);
  // Without validation, the lowest epoch loss, and the summary says so.
  runs = {run("a", 0.4, std::nullopt), run("b", 0.2, std::nullopt)};
  const nlohmann::json k = nlohmann::json::parse(runs_summary_json(runs));
  EXPECT_EQ(k["best_run"]["name"], "b");
  EXPECT_EQ(k["best_run"]["by"], "epoch_loss");
  // A failed run is never the best.
  runs[1].state = RunState::Failed;
  EXPECT_EQ(nlohmann::json::parse(runs_summary_json(runs))["best_run"]["name"], "a");
}

// A run's CPU utilisation is its steps' CPU time over their wall time, each line weighed by its
// steps and its step time; GPU figures only where its log has them (NVML read on its device).
TEST(RunOutcome, CpuUtilizationIsCpuTimeOverWallTimeAndGpuFiguresWhereLogged) {
  ScratchDir dir;
  const std::string log = dir.write_raw(
      "m.jsonl",
      "{\"step\":1,\"epoch\":1,\"loss\":1,\"step_ms\":10,\"cpu_utilization\":2}\n"
      "{\"step\":4,\"steps\":3,\"epoch\":1,\"loss\":1,\"step_ms\":30,\"cpu_utilization\":0.5}\n");
  RunResult cpu_run = run("cpu-run", 1, std::nullopt);
  cpu_run.outcome = read_run_outcome(log);
  // 10 ms x 2 cores + 3 x 30 ms x 0.5 cores = 65 ms of CPU in 100 ms.
  ASSERT_TRUE(cpu_run.outcome.cpu_utilization.has_value());
  EXPECT_DOUBLE_EQ(*cpu_run.outcome.cpu_utilization, 0.65);
  EXPECT_FALSE(cpu_run.outcome.gpu_utilization_pct.has_value());
  nlohmann::json j = nlohmann::json::parse(runs_summary_json({cpu_run}));
  EXPECT_DOUBLE_EQ(j["runs"][0]["cpu_utilization"].get<double>(), 0.65);
  EXPECT_TRUE(j["runs"][0]["gpu_utilization_pct"].is_null());
  EXPECT_TRUE(j["runs"][0]["gpu_memory_peak_bytes"].is_null());
  std::string table = runs_summary_table({cpu_run});
  EXPECT_NE(table.find("  cpu\n"), std::string::npos) << table;  // the last column
  EXPECT_NE(table.find("  0.65\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("gpu"), std::string::npos) << table;

  const std::string gpu_log = dir.write_raw(
      "g.jsonl",
      "{\"step\":1,\"loss\":1,\"step_ms\":5,\"cpu_utilization\":1,\"gpu_utilization_pct\":90,"
      "\"gpu_memory_used_bytes\":3221225472}\n"
      "{\"step\":3,\"steps\":2,\"loss\":1,\"step_ms\":5,\"cpu_utilization\":1,"
      "\"gpu_utilization_pct\":60,\"gpu_memory_used_bytes\":1073741824}\n");
  RunResult gpu_run = run("gpu-run", 1, std::nullopt);
  gpu_run.outcome = read_run_outcome(gpu_log);
  EXPECT_DOUBLE_EQ(*gpu_run.outcome.gpu_utilization_pct, 70);  // (90 + 2 x 60) / 3
  EXPECT_EQ(*gpu_run.outcome.gpu_memory_peak_bytes, 3221225472u);
  j = nlohmann::json::parse(runs_summary_json({cpu_run, gpu_run}));
  EXPECT_DOUBLE_EQ(j["runs"][1]["gpu_utilization_pct"].get<double>(), 70);
  EXPECT_EQ(j["runs"][1]["gpu_memory_peak_bytes"].get<uint64_t>(), 3221225472u);
  table = runs_summary_table({cpu_run, gpu_run});
  EXPECT_NE(table.find("  cpu   gpu  gpu mem\n"), std::string::npos) << table;
  EXPECT_NE(table.find("70%  3.00 GiB"), std::string::npos) << table;
}

}  // namespace
}  // namespace minitrain
