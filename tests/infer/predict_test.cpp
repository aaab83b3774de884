// `minitrain predict` as a library call: weights from a training run, X.npy in, Y.npy out, equal
// to the model's own forward; inputs that do not fit the model fail before anything is written.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/npy.h"
#include "nn/gemm_backend.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "optim/optimizer.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/checkpoint.h"
#include "infer/predict.h"

namespace minitrain {
namespace {

using testing::ScratchDir;

TEST(Predict, RoundTripsThroughWeightsAndNpyFiles) {
  ScratchDir dir;
  Generator gen(4);
  auto model = make_mlp({3, 8, 2}, Activation::GELU, gen);
  save_weights(dir.path("w.safetensors"), *model);
  const Tensor x = testing::random_tensor({37, 3}, 9);
  write_npy(dir.path("x.npy"), x);

  PredictConfig c;
  c.weights = dir.path("w.safetensors");
  c.model = "mlp:3,8,2";
  c.activation = "gelu";
  c.input = dir.path("x.npy");
  c.output = dir.path("y.npy");
  c.device = "cpu";
  c.batch_size = 10;  // four batches, the last partial
  EXPECT_EQ(run_predict(c), 37);

  model->eval();
  const Tensor want = model->forward(x);
  const Tensor got = read_npy(c.output);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(testing::tensor_bytes(got), testing::tensor_bytes(want));
}

// What predict writes is what the loss compares with the targets (TrainedModel::target_values,
// the one mapping evaluate uses too): a poisson_nll model (log_input) outputs the log of the rate
// and predict writes the rate (before, the log); kl_div without log_target likewise the
// probabilities; bce_with_logits' --probabilities the sigmoid of its logits, and its classes 1
// where the logit is > 0. With log_input false, or log_target, the outputs as they are.
TEST(Predict, EachLossWritesWhatItsTargetsAre) {
  const auto as_is = [](double z) { return z; };
  const auto exp_of = [](double z) { return std::exp(z); };
  const auto sigmoid = [](double z) { return 1.0 / (1.0 + std::exp(-z)); };
  const auto step = [](double z) { return z > 0 ? 1.0 : 0.0; };
  struct Case {
    const char* loss;
    const char* settings;  // metadata 'loss_settings', "" for none
    bool probabilities;
    double (*want)(double);
  };
  const Case cases[] = {{"poisson_nll", "", false, exp_of},
                        {"poisson_nll", R"({"poisson-log-input":false})", false, as_is},
                        {"kl_div", "", false, exp_of},
                        {"kl_div", R"({"kl-log-target":true})", false, as_is},
                        {"bce_with_logits", "", true, sigmoid},
                        {"bce_with_logits", "", false, step}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::string(k.loss) + " " + k.settings +
                 (k.probabilities ? " --probabilities" : ""));
    ScratchDir dir;
    Generator gen(4);
    auto model = make_mlp({3, 8, 2}, Activation::Tanh, gen);
    std::map<std::string, std::string> meta{
        {"model", "mlp:3,8,2"}, {"activation", "tanh"}, {"loss", k.loss}};
    if (*k.settings != '\0') meta["loss_settings"] = k.settings;
    save_weights(dir.path("w.safetensors"), *model, meta);
    const Tensor x = testing::random_tensor({11, 3}, 9);
    write_npy(dir.path("x.npy"), x);
    PredictConfig c;
    c.weights = dir.path("w.safetensors");
    c.input = dir.path("x.npy");
    c.output = dir.path("y.npy");
    c.device = "cpu";
    c.probabilities = k.probabilities;
    EXPECT_EQ(run_predict(c), 11);
    model->eval();
    const Tensor z = model->forward(x);
    // bce's classes are int64, as torch.argmax's: read exactly as float64.
    const Tensor got = read_npy(c.output, Device::cpu(), NpyIntegers::AsFloat64);
    ASSERT_EQ(got.shape(), z.shape());
    int64_t changed = 0;  // outputs the mapping moved: a dropped mapping would fail here
    for (int64_t i = 0; i < z.numel(); ++i) {
      const float zi = z.data<float>()[i];
      const float want = static_cast<float>(k.want(double(zi)));
      const double g =
          got.dtype() == DType::Float64 ? got.data<double>()[i] : double(got.data<float>()[i]);
      EXPECT_EQ(g, double(want)) << "element " << i;
      changed += want != zi;
    }
    if (*k.settings == '\0') {  // the cases that map
      EXPECT_EQ(changed, z.numel());
    }
  }
}

TEST(Predict, InputWithTheWrongColumnsNamesBothAndKeepsTheOutput) {
  ScratchDir dir;
  Generator gen(4);
  auto model = make_mlp({8, 4, 1}, Activation::ReLU, gen);
  save_weights(dir.path("w.safetensors"), *model);
  write_npy(dir.path("x.npy"), testing::random_tensor({6, 5}, 9));
  PredictConfig c;
  c.weights = dir.path("w.safetensors");
  c.model = "mlp:8,4,1";
  c.activation = "relu";  // weights without metadata: both flags are needed
  c.input = dir.path("x.npy");
  c.output = dir.write_raw("y.npy", "precious");
  c.device = "cpu";
  testing::expect_error<ShapeError>([&] { run_predict(c); }, {"[6, 5]", "expects [rows, 8]"});
  EXPECT_EQ(read_file_bytes(c.output), "precious");
}

TEST(Predict, WeightsForAnotherModelAreRefused) {
  ScratchDir dir;
  Generator gen(4);
  auto model = make_mlp({3, 8, 2}, Activation::ReLU, gen);
  save_weights(dir.path("w.safetensors"), *model);
  write_npy(dir.path("x.npy"), testing::random_tensor({6, 3}, 9));
  PredictConfig c;
  c.weights = dir.path("w.safetensors");
  c.model = "mlp:3,16,2";
  c.activation = "relu";
  c.input = dir.path("x.npy");
  c.output = dir.path("y.npy");
  c.device = "cpu";
  testing::expect_error<ShapeError>(
      [&] { run_predict(c); },
      {"--model mlp:3,16,2 does not fit the tensors of", "\"0.weight\" is [8, 3]"});
  EXPECT_FALSE(std::ifstream(c.output).good());
  // The same mismatch from the metadata names the metadata field.
  save_weights(dir.path("w.safetensors"), *model,
               {{"model", "mlp:3,16,2"}, {"activation", "relu"}});
  c.model = "";
  c.activation = "";
  testing::expect_error<ShapeError>(
      [&] { run_predict(c); },
      {"the model mlp:3,16,2 that its metadata 'model' names does not fit its tensors",
       "\"0.weight\" is [8, 3] but the model has [16, 3]"});
  EXPECT_FALSE(std::ifstream(c.output).good());
}

// The weights say what they are: with minitrain's metadata, predict needs neither --model nor
// --activation, and gives exactly the model's own forward.
struct SavedModel {
  std::unique_ptr<Module> model;
  Tensor x;
  Tensor want;  // model(x)
};

SavedModel save_gelu_model(const ScratchDir& dir, const std::map<std::string, std::string>& meta) {
  Generator gen(4);
  SavedModel s;
  s.model = make_mlp({3, 8, 2}, Activation::GELU, gen);
  save_weights(dir.path("w.safetensors"), *s.model, meta);
  s.x = testing::random_tensor({13, 3}, 9);
  write_npy(dir.path("x.npy"), s.x);
  s.model->eval();
  s.want = s.model->forward(s.x);
  return s;
}

PredictConfig config_for(const ScratchDir& dir, const std::string& weights, const std::string& in,
                         const std::string& out) {
  PredictConfig c;
  c.weights = dir.path(weights);
  c.input = dir.path(in);
  c.output = dir.path(out);
  c.device = "cpu";
  return c;
}

TEST(Predict, TakesModelAndActivationFromTheWeightsMetadata) {
  ScratchDir dir;
  const SavedModel s = save_gelu_model(dir, {{"model", "mlp:3,8,2"}, {"activation", "gelu"}});
  PredictConfig c = config_for(dir, "w.safetensors", "x.npy", "y.npy");
  EXPECT_EQ(run_predict(c), 13);
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)), testing::tensor_bytes(s.want));
  // The same values given as flags agree.
  c.model = "mlp:3,8,2";
  c.activation = "gelu";
  EXPECT_EQ(run_predict(c), 13);
}

TEST(Predict, AFlagThatContradictsTheWeightsIsAnErrorNamingBoth) {
  ScratchDir dir;
  save_gelu_model(dir, {{"model", "mlp:3,8,2"}, {"activation", "gelu"}});
  PredictConfig c = config_for(dir, "w.safetensors", "x.npy", "y.npy");
  c.activation = "relu";  // would run, and give wrong numbers
  testing::expect_error<ValueError>(
      [&] { run_predict(c); },
      {"--activation relu contradicts the weights", "trained as gelu", "metadata 'activation'"});
  c.activation = "";
  c.model = "mlp:3,16,2";
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"--model mlp:3,16,2 contradicts", "trained as mlp:3,8,2"});
  EXPECT_FALSE(std::ifstream(c.output).good());
}

TEST(Predict, WeightsWithoutMetadataNeedTheFlagsAndSaySo) {
  ScratchDir dir;
  save_gelu_model(dir, {});  // as PyTorch's save_file would write them
  PredictConfig c = config_for(dir, "w.safetensors", "x.npy", "y.npy");
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"does not say which model", "give --model"});
  c.model = "mlp:3,8,2";
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"does not say which activation", "give --activation"});
  c.activation = "gelu";
  EXPECT_EQ(run_predict(c), 13);
}

TEST(Predict, ReadsACheckpointLikeTheWeightsItHolds) {
  ScratchDir dir;
  const SavedModel s = save_gelu_model(dir, {});
  SGD sgd(s.model->named_parameters(), SGDOptions{});
  save_checkpoint(dir.path("ckpt.safetensors"), *s.model, sgd, CheckpointPosition{},
                  {{"model", "mlp:3,8,2"}, {"activation", "gelu"}});
  PredictConfig c = config_for(dir, "ckpt.safetensors", "x.npy", "y.npy");
  EXPECT_EQ(run_predict(c), 13);
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)), testing::tensor_bytes(s.want));
}

TEST(Predict, ReadsCsvLeavingOutTheTrainingTargetsAndWritesCsvByExtension) {
  ScratchDir dir;
  const SavedModel s = save_gelu_model(
      dir, {{"model", "mlp:3,8,2"}, {"activation", "gelu"}, {"target_columns", R"(["p","q, r"])"}});
  // The table the model was trained on: features a, b, c with the targets among them.
  std::string table = "a,\"q, r\",b,p,c\n";
  const float* x = s.x.data<float>();
  for (int64_t i = 0; i < 13; ++i) {
    char row[160];
    std::snprintf(row, sizeof row, "%.9g,7,%.9g,8,%.9g\n", x[i * 3], x[i * 3 + 1], x[i * 3 + 2]);
    table += row;
  }
  dir.write_raw("t.csv", table);
  PredictConfig c = config_for(dir, "w.safetensors", "t.csv", "y.csv");
  EXPECT_EQ(run_predict(c), 13);
  const std::string out = read_file_bytes(c.output);
  // The outputs named as the targets were, "q, r" quoted (RFC 4180): unquoted it made 3 columns.
  ASSERT_EQ(out.substr(0, out.find('\n')), "p,\"q, r\"");
  // The CSV's values are the .npy path's, to float32's 9 significant digits.
  c.output = dir.path("y.npy");
  run_predict(c);
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)), testing::tensor_bytes(s.want));
  std::istringstream lines(out);
  std::string line;
  std::getline(lines, line);
  const float* want = s.want.data<float>();
  for (int64_t i = 0; i < 13; ++i) {
    ASSERT_TRUE(std::getline(lines, line)) << "row " << i;
    float a = 0, b = 0;
    ASSERT_EQ(std::sscanf(line.c_str(), "%f,%f", &a, &b), 2) << line;
    EXPECT_EQ(a, want[i * 2]) << "row " << i;
    EXPECT_EQ(b, want[i * 2 + 1]) << "row " << i;
  }
}

TEST(Predict, UnlabelledCsvAndUnknownExtensions) {
  ScratchDir dir;
  save_gelu_model(dir,
                  {{"model", "mlp:3,8,2"}, {"activation", "gelu"}, {"target_columns", "[\"p\"]"}});
  dir.write_raw("u.csv", "a,b,c\n1,2,3\n4,5,6\n");  // no target column: nothing to leave out
  PredictConfig c = config_for(dir, "w.safetensors", "u.csv", "y.npy");
  EXPECT_EQ(run_predict(c), 2);
  c.output = dir.path("y.txt");
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"--output", "y.txt", "neither .npy nor .csv"});
  c.output = dir.path("y.npy");
  c.input = dir.write_raw("x.parquet", "PAR1");
  testing::expect_error<ValueError>([&] { run_predict(c); }, {"--input", "x.parquet"});
  // A table with a column too many (an unnamed target) says how to name it.
  c.input = dir.write_raw("t4.csv", "a,b,c,d\n1,2,3,4\n");
  testing::expect_error<ShapeError>([&] { run_predict(c); },
                                    {"[1, 4]", "expects [rows, 3]", "--target-columns"});
  c.target_columns = {"d"};
  EXPECT_EQ(run_predict(c), 1);
}

// --keep-columns and --class-and-probabilities (issue 30): an id column passes through, quoted
// per RFC 4180, before the class and each class's probability, all in one CSV; misuse is refused.
TEST(Predict, KeptColumnsAndClassWithProbabilitiesInOneCsv) {
  ScratchDir dir;
  const SavedModel s = save_gelu_model(dir, {{"model", "mlp:3,8,2"},
                                             {"activation", "gelu"},
                                             {"loss", "cross_entropy"},
                                             {"classes", R"(["no","yes, sir"])"},
                                             {"target_columns", R"(["label"])"},
                                             {"feature_columns", R"(["a","b","c"])"}});
  std::string table = "id,c,a,b,label\n";
  const float* x = s.x.data<float>();
  for (int64_t i = 0; i < 13; ++i) {
    char row[200];
    std::snprintf(row, sizeof row, "\"r,%d\",%.9g,%.9g,%.9g,no\n", int(i), x[i * 3 + 2], x[i * 3],
                  x[i * 3 + 1]);
    table += row;
  }
  dir.write_raw("t.csv", table);
  PredictConfig c = config_for(dir, "w.safetensors", "t.csv", "y.csv");
  testing::expect_error<IoError>([&] { run_predict(c); }, {"column 'id' is neither"});
  c.ignore_columns = {"id"};
  EXPECT_EQ(run_predict(c), 13);
  c.ignore_columns.clear();
  c.keep_columns = {"id"};
  c.class_and_probabilities = true;
  EXPECT_EQ(run_predict(c), 13);
  std::istringstream lines(read_file_bytes(c.output));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "id,label,no,\"yes, sir\"");
  const float* z = s.want.data<float>();
  for (int64_t i = 0; i < 13; ++i) {
    ASSERT_TRUE(std::getline(lines, line)) << "row " << i;
    const std::string id = "\"r," + std::to_string(i) + "\",";
    ASSERT_EQ(line.substr(0, id.size()), id) << line;
    const bool yes = z[i * 2 + 1] > z[i * 2];
    const std::string cls = yes ? "\"yes, sir\"," : "no,";
    ASSERT_EQ(line.substr(id.size(), cls.size()), cls) << line;
    float p0 = 0, p1 = 0;
    ASSERT_EQ(std::sscanf(line.c_str() + id.size() + cls.size(), "%f,%f", &p0, &p1), 2) << line;
    EXPECT_NEAR(p0 + p1, 1.0, 1e-6);
    EXPECT_EQ(p1 > p0, yes) << line;
  }
  c.output = dir.path("y.npy");
  testing::expect_error<ValueError>([&] { run_predict(c); }, {"--keep-columns", "y.npy"});
  c.keep_columns.clear();
  c.ignore_columns = {"id"};
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"--class-and-probabilities", "is not .csv"});
  c.output = dir.path("y.csv");
  c.probabilities = true;
  testing::expect_error<ValueError>([&] { run_predict(c); }, {"drop --probabilities"});
}

// Issue 33: weights that say the training ignored 'id' (metadata 'ignore_columns') predict on the
// training table without --ignore-columns, and on rows without the id; --keep-columns id still
// passes it through; and the advice for an unknown column names predict's --keep-columns.
TEST(Predict, TheTrainingsIgnoredColumnsAreIgnoredWhereTheInputHasThem) {
  ScratchDir dir;
  const SavedModel s = save_gelu_model(dir, {{"model", "mlp:3,8,2"},
                                             {"activation", "gelu"},
                                             {"feature_columns", R"(["a","b","c"])"},
                                             {"ignore_columns", R"(["id"])"}});
  std::string with_id = "id,a,b,c\n", without = "c,b,a\n";
  const float* x = s.x.data<float>();
  for (int64_t i = 0; i < 13; ++i) {
    char row[200];
    std::snprintf(row, sizeof row, "r%d,%.9g,%.9g,%.9g\n", int(i), x[i * 3], x[i * 3 + 1],
                  x[i * 3 + 2]);
    with_id += row;
    std::snprintf(row, sizeof row, "%.9g,%.9g,%.9g\n", x[i * 3 + 2], x[i * 3 + 1], x[i * 3]);
    without += row;
  }
  dir.write_raw("t.csv", with_id);
  dir.write_raw("n.csv", without);
  PredictConfig c = config_for(dir, "w.safetensors", "t.csv", "y.npy");
  EXPECT_EQ(run_predict(c), 13);
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)), testing::tensor_bytes(s.want));
  c.input = dir.path("n.csv");
  EXPECT_EQ(run_predict(c), 13);
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)), testing::tensor_bytes(s.want));
  c.input = dir.path("t.csv");
  c.output = dir.path("y.csv");
  c.keep_columns = {"id"};
  EXPECT_EQ(run_predict(c), 13);
  EXPECT_EQ(read_file_bytes(c.output).rfind("id,y0,y1\nr0,", 0), 0u) << read_file_bytes(c.output);

  save_gelu_model(dir, {{"model", "mlp:3,8,2"},  // weights that do not say: as before
                        {"activation", "gelu"},
                        {"feature_columns", R"(["a","b","c"])"}});
  c.keep_columns = {};
  testing::expect_error<IoError>(
      [&] { run_predict(c); },
      {"column 'id' is neither", "--ignore-columns (or --keep-columns to pass it through"});
}

// --gemm picks the Linear layers' backend: "reference" (the in-order sums the C of `minitrain
// export` computes) gives the model's forward through that backend, bit for bit; an unknown name
// or a CUDA backend on the CPU is refused before anything is written.
TEST(Predict, GemmChoosesTheLinearLayersBackend) {
  ScratchDir dir;
  SavedModel s = save_gelu_model(dir, {{"model", "mlp:3,8,2"}, {"activation", "gelu"}});
  PredictConfig c = config_for(dir, "w.safetensors", "x.npy", "y.npy");
  c.gemm = "reference";
  EXPECT_EQ(run_predict(c), 13);
  set_gemm_backend(*s.model, "reference");
  EXPECT_EQ(testing::tensor_bytes(read_npy(c.output)),
            testing::tensor_bytes(s.model->forward(s.x)));
  c.gemm = "tiled9";
  c.output = dir.path("z.npy");
  testing::expect_error<ValueError>([&] { run_predict(c); },
                                    {"--gemm", "unknown GEMM backend 'tiled9'", "reference"});
  EXPECT_FALSE(std::ifstream(c.output).good());
}

}  // namespace
}  // namespace minitrain
