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

}  // namespace
}  // namespace minitrain
