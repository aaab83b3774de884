// `minitrain evaluate` as a library call: metrics against answers known in closed form (a perfect
// model, a constant offset), the targets of a table taken from the weights, and bad input.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include "core/error.h"
#include "core/npy.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "infer/evaluate.h"
#include "train/loss_metadata.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

struct Fixture {
  ScratchDir dir;
  Tensor x, fx;  // inputs and the model's outputs on them
  /// `loss`, `loss_settings`: the metadata train --save writes ("" for none).
  explicit Fixture(const std::string& loss = "", const std::string& loss_settings = "") {
    Generator gen(3);
    auto model = make_mlp({3, 8, 2}, Activation::Tanh, gen);
    std::map<std::string, std::string> metadata{
        {"model", "mlp:3,8,2"}, {"activation", "tanh"}, {"target_columns", R"(["p","q"])"}};
    if (!loss.empty()) metadata["loss"] = loss;
    if (!loss_settings.empty()) metadata["loss_settings"] = loss_settings;
    save_weights(dir.path("w.safetensors"), *model, metadata);
    x = testing::random_tensor({21, 3}, 5);
    model->eval();
    fx = model->forward(x);
    write_npy(dir.path("x.npy"), x);
  }
  EvaluateConfig config(const std::string& targets) const {
    EvaluateConfig c;
    c.weights = dir.path("w.safetensors");
    c.data = dir.path("x.npy");
    c.targets = dir.path(targets);
    c.device = "cpu";
    c.batch_size = 8;  // three batches, the last partial
    return c;
  }
};

TEST(Evaluate, APerfectModelScoresZeroErrorAndR2One) {
  Fixture f;
  write_npy(f.dir.path("y.npy"), f.fx);
  const Evaluation e = run_evaluate(f.config("y.npy"));
  EXPECT_EQ(e.rows, 21);
  EXPECT_EQ(e.outputs, 2);
  EXPECT_EQ(e.loss, 0.0);
  EXPECT_EQ(e.mae, 0.0);
  EXPECT_EQ(e.r2, 1.0);
}

TEST(Evaluate, AConstantOffsetGivesItsSquareItsSizeAndR2FromTheSpread) {
  Fixture f;
  // Targets 0.5 below the model's outputs: every error is exactly +0.5 in float32 arithmetic for
  // values of this size, so mse 0.25, mae 0.5, rmse 0.5.
  Tensor y = Tensor::empty(f.fx.shape());
  const float* fx = f.fx.data<float>();
  float* yv = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) yv[i] = fx[i] - 0.5f;
  write_npy(f.dir.path("y.npy"), y);
  const Evaluation e = run_evaluate(f.config("y.npy"));
  EXPECT_NEAR(e.loss, 0.25, 1e-6);
  EXPECT_NEAR(e.mae, 0.5, 1e-6);
  EXPECT_NEAR(e.rmse, 0.5, 1e-6);
  // r2 per output = 1 - n * 0.25 / sum((y - mean)^2), averaged over the two outputs.
  double r2 = 0;
  for (int j = 0; j < 2; ++j) {
    double mean = 0, spread = 0;
    for (int i = 0; i < 21; ++i) mean += yv[i * 2 + j] / 21.0;
    for (int i = 0; i < 21; ++i) spread += (yv[i * 2 + j] - mean) * (yv[i * 2 + j] - mean);
    r2 += (1.0 - 21 * 0.25 / spread) / 2;
  }
  EXPECT_NEAR(e.r2, r2, 1e-5);
  const std::string json = evaluation_json(e);
  EXPECT_EQ(json.rfind("{\"rows\":21,\"outputs\":2,\"loss\":", 0), 0u) << json;
}

TEST(Evaluate, ATableTakesItsTargetsFromTheWeightsAndBadInputIsNamed) {
  Fixture f;
  // Columns in another order than the features: p and q are the targets, a b c the features.
  std::string table = "p,a,b,q,c\n";
  const float* x = f.x.data<float>();
  const float* fx = f.fx.data<float>();
  for (int64_t i = 0; i < 21; ++i) {
    char row[200];
    std::snprintf(row, sizeof row, "%.9g,%.9g,%.9g,%.9g,%.9g\n", fx[i * 2], x[i * 3], x[i * 3 + 1],
                  fx[i * 2 + 1], x[i * 3 + 2]);
    table += row;
  }
  EvaluateConfig c = f.config("");
  c.targets = "";
  c.data = f.dir.write_raw("t.csv", table);
  EXPECT_EQ(run_evaluate(c).loss, 0.0);  // the table's own targets, found by name

  c.target_columns = {"q", "p"};
  testing::expect_error<ValueError>(
      [&] { run_evaluate(c); },
      {"--target-columns q,p contradicts the weights", "trained to predict p,q"});
  c.target_columns = {};
  c.data = f.dir.path("x.npy");
  c.targets = "";
  testing::expect_error<ValueError>([&] { run_evaluate(c); }, {"needs --targets Y.npy"});
  write_npy(f.dir.path("y3.npy"), testing::random_tensor({21, 3}, 6));
  c.targets = f.dir.path("y3.npy");
  testing::expect_error<ShapeError>([&] { run_evaluate(c); },
                                    {"3 feature(s) and 3 target(s)", "takes 3 and gives 2"});
}

// Issue 33's user trial: `evaluate` on the training table needed --ignore-columns id again, since
// the weights did not say which columns the training ignored; and its message then advised
// --keep-columns, a flag evaluate does not take.
TEST(Evaluate, TheTrainingsIgnoredColumnsAreIgnoredOnTheSameTable) {
  ScratchDir dir;
  std::string table = "id,a,b,y\n";
  for (int i = 0; i < 30; ++i)
    table += "row" + std::to_string(i) + "," + std::to_string(i % 7) + "," +
             std::to_string((i * 3) % 5) + "," + std::to_string(0.5 * (i % 7) - 0.25 * i) + "\n";
  const std::string path = dir.write_raw("t.csv", table);
  TrainConfig t = testing::small_run("cpu", dir.path("w.safetensors"));
  t.data = path;
  t.target_columns = {"y"};
  t.model = "mlp:2,8,1";
  t.ignore_columns = {"id"};
  testing::train(t);

  EvaluateConfig c;
  c.weights = dir.path("w.safetensors");
  c.data = path;
  c.device = "cpu";
  const Evaluation e = run_evaluate(c);  // no --ignore-columns: the weights say 'id'
  EXPECT_EQ(e.rows, 30);
  c.ignore_columns = {"id"};  // the flag as before: the same numbers
  EXPECT_EQ(run_evaluate(c).loss, e.loss);

  // Weights that do not say (older files, trained on a table without the id): refused, and the
  // advice names evaluate's --ignore-columns only.
  TrainConfig no_id = t;
  no_id.data = dir.write_raw("n.csv", "a,b,y\n1,2,3\n2,1,0\n3,3,1\n");
  no_id.ignore_columns = {};
  no_id.save = dir.path("old.safetensors");
  testing::train(no_id);
  c.weights = no_id.save;
  c.ignore_columns = {};
  try {
    run_evaluate(c);
    ADD_FAILURE() << "no IoError for the id column";
  } catch (const IoError& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find("column 'id' is neither"), std::string::npos) << what;
    EXPECT_NE(what.find("--ignore-columns"), std::string::npos) << what;
    EXPECT_EQ(what.find("--keep-columns"), std::string::npos) << what;
  }
}

// The targets as `f(output)` of the fixture's outputs, rounded to float as the model's are.
template <typename F>
void write_targets_of_outputs(const Fixture& f, F map) {
  Tensor y = Tensor::empty(f.fx.shape());
  const float* fx = f.fx.data<float>();
  float* yv = y.data<float>();
  for (int64_t i = 0; i < y.numel(); ++i) yv[i] = static_cast<float>(map(double(fx[i])));
  write_npy(f.dir.path("y.npy"), y);
}

// A poisson_nll model (log_input, torch's default) outputs the log of the rate: its errors are
// the rate's. Before, evaluate compared the log with the counts (r2 -0.6 on a count table).
// Likewise kl_div (without log_target) outputs log-probabilities and its targets are
// probabilities: the errors are exp(output)'s, the mapping predict writes. With log_input false,
// or log_target, the outputs as they are.
TEST(Evaluate, APoissonOrKlDivModelIsScoredOnItsValuesNotTheirLogs) {
  for (const auto& [loss, as_is] :
       {std::pair<std::string, std::string>{"poisson_nll", R"({"poisson-log-input":false})"},
        {"kl_div", R"({"kl-log-target":true})"}}) {
    SCOPED_TRACE(loss);
    Fixture f(loss);
    write_targets_of_outputs(f, [](double z) { return std::exp(z); });
    const Evaluation e = run_evaluate(f.config("y.npy"));
    EXPECT_EQ(e.mse, 0.0);
    EXPECT_EQ(e.r2, 1.0);
    EXPECT_EQ(e.loss_name, loss);

    Fixture plain(loss, as_is);
    write_targets_of_outputs(plain, [](double z) { return z; });
    EXPECT_EQ(run_evaluate(plain.config("y.npy")).mse, 0.0);
  }
}

// The loss is the one trained: huber's delta from the metadata, not its default. Every error is
// 0.5 (as in AConstantOffset...): huber with delta 0.2 gives 0.2 (0.5 - 0.1) = 0.08 where the
// default delta 1 gave 0.5 * 0.25 = 0.125.
TEST(Evaluate, TheLossIsTheTrainedOneWithItsSettings) {
  Fixture f("huber", R"({"huber-delta":0.2})");
  write_targets_of_outputs(f, [](double z) { return float(z) - 0.5f; });
  EXPECT_NEAR(run_evaluate(f.config("y.npy")).loss, 0.08, 1e-6);
  Fixture plain("huber");
  write_targets_of_outputs(plain, [](double z) { return float(z) - 0.5f; });
  EXPECT_NEAR(run_evaluate(plain.config("y.npy")).loss, 0.125, 1e-6);
}

// bce_with_logits: the errors of the probabilities (mse is the Brier score) and the share of
// outputs classed right (logit > 0 is 1); soft labels have no accuracy.
TEST(Evaluate, ABceModelIsScoredOnItsProbabilitiesWithItsAccuracy) {
  Fixture f("bce_with_logits");
  const float* fx = f.fx.data<float>();
  Tensor y = Tensor::empty(f.fx.shape());
  float* yv = y.data<float>();
  double brier = 0, right = 0;
  for (int64_t i = 0; i < y.numel(); ++i) {
    yv[i] = i % 3 == 0 ? 1.0f : 0.0f;  // some right, some wrong, whatever the model says
    const double p = static_cast<float>(1.0 / (1.0 + std::exp(-double(fx[i]))));
    brier += (p - yv[i]) * (p - yv[i]) / double(y.numel());
    right += (fx[i] > 0) == (yv[i] == 1.0f);
  }
  write_npy(f.dir.path("y.npy"), y);
  const Evaluation e = run_evaluate(f.config("y.npy"));
  EXPECT_NEAR(e.mse, brier, 1e-12);
  EXPECT_DOUBLE_EQ(e.binary_accuracy, right / double(y.numel()));
  EXPECT_NE(evaluation_json(e).find("\"accuracy\""), std::string::npos);

  yv[0] = 0.5f;  // a soft label: no class to be right about
  write_npy(f.dir.path("y.npy"), y);
  const Evaluation soft = run_evaluate(f.config("y.npy"));
  EXPECT_TRUE(std::isnan(soft.binary_accuracy));
  EXPECT_EQ(evaluation_json(soft).find("\"accuracy\""), std::string::npos);
}

TEST(LossMetadata, EverySettingGoesThereAndBack) {
  LossOptions o;
  o.name = "cross_entropy";
  o.class_weights = {0.5, 2.0, 1.25};
  o.label_smoothing = 0.1;
  o.ignore_index = 7;
  const std::string text = loss_settings_metadata(o);
  LossOptions back;
  back.name = "cross_entropy";
  read_loss_settings_metadata(text, "w.safetensors", back);
  EXPECT_EQ(back.class_weights, o.class_weights);
  EXPECT_EQ(back.label_smoothing, 0.1);
  EXPECT_EQ(back.ignore_index, 7);

  LossOptions p;
  p.log_input = false;
  p.log_target = true;
  p.pos_weight = {3.0};
  p.delta = 0.25;
  p.beta = 0.0;
  LossOptions pb;
  read_loss_settings_metadata(loss_settings_metadata(p), "w.safetensors", pb);
  EXPECT_FALSE(pb.log_input);
  EXPECT_TRUE(pb.log_target);
  EXPECT_EQ(pb.pos_weight, p.pos_weight);
  EXPECT_EQ(pb.delta, 0.25);
  EXPECT_EQ(pb.beta, 0.0);
  EXPECT_EQ(loss_settings_metadata(LossOptions{}), "");  // defaults: nothing to write
}

TEST(LossMetadata, BadSettingsInAFileAreNamed) {
  LossOptions o;
  testing::expect_error<IoError>([&] { read_loss_settings_metadata("[1,2]", "w.safetensors", o); },
                                 {"w.safetensors", "'loss_settings'", "not a JSON object"});
  testing::expect_error<IoError>(
      [&] { read_loss_settings_metadata(R"({"huber-width":2})", "w.safetensors", o); },
      {"w.safetensors", "'huber-width'", "no loss setting"});
  testing::expect_error<IoError>(
      [&] { read_loss_settings_metadata(R"({"huber-delta":"big"})", "w.safetensors", o); },
      {"w.safetensors", "'huber-delta'", "\"big\""});
  // In range and taken by the loss, as training's flags are checked.
  Fixture negative("huber", R"({"huber-delta":-1})");
  write_targets_of_outputs(negative, [](double z) { return z; });
  testing::expect_error<ValueError>([&] { run_evaluate(negative.config("y.npy")); },
                                    {"metadata 'loss_settings'", "delta"});
  Fixture foreign("mse", R"({"huber-delta":0.5})");
  write_targets_of_outputs(foreign, [](double z) { return z; });
  testing::expect_error<ValueError>([&] { run_evaluate(foreign.config("y.npy")); },
                                    {"metadata 'loss_settings'", "huber-delta", "--loss mse"});
}

}  // namespace
}  // namespace minitrain
