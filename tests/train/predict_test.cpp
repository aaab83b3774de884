// `minitrain predict` as a library call: weights from a training run, X.npy in, Y.npy out, equal
// to the model's own forward; inputs that do not fit the model fail before anything is written.

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/npy.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"
#include "train/predict.h"

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

TEST(Predict, InputWithTheWrongColumnsNamesBothAndKeepsTheOutput) {
  ScratchDir dir;
  Generator gen(4);
  auto model = make_mlp({8, 4, 1}, Activation::ReLU, gen);
  save_weights(dir.path("w.safetensors"), *model);
  write_npy(dir.path("x.npy"), testing::random_tensor({6, 5}, 9));
  PredictConfig c;
  c.weights = dir.path("w.safetensors");
  c.model = "mlp:8,4,1";
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
  c.input = dir.path("x.npy");
  c.output = dir.path("y.npy");
  c.device = "cpu";
  EXPECT_THROW(run_predict(c), Error);
  EXPECT_FALSE(std::ifstream(c.output).good());
}

}  // namespace
}  // namespace minitrain
