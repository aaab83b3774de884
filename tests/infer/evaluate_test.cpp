// `minitrain evaluate` as a library call: metrics against answers known in closed form (a perfect
// model, a constant offset), the targets of a table taken from the weights, and bad input.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/npy.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "tests/train/train_test_util.h"
#include "infer/evaluate.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

struct Fixture {
  ScratchDir dir;
  Tensor x, fx;  // inputs and the model's outputs on them
  Fixture() {
    Generator gen(3);
    auto model = make_mlp({3, 8, 2}, Activation::Tanh, gen);
    save_weights(
        dir.path("w.safetensors"), *model,
        {{"model", "mlp:3,8,2"}, {"activation", "tanh"}, {"target_columns", R"(["p","q"])"}});
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

}  // namespace
}  // namespace minitrain
