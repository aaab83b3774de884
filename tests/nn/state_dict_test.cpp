// Weights in and out: state_dict names and copies, strict loading that changes nothing on
// failure, dtype conversion, .safetensors round trips and a PyTorch-layout fixture.

#include "nn/state_dict.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/safetensors.h"
#include "core/version.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_values;
using ::testing::Not;

using TensorList = std::vector<std::pair<std::string, Tensor>>;

std::unique_ptr<Sequential> mlp(std::vector<int64_t> sizes, uint64_t seed,
                                DType dtype = DType::Float32) {
  Generator gen(seed);
  return make_mlp(sizes, Activation::ReLU, gen, Device::cpu(), dtype);
}

std::vector<std::vector<double>> values_of(Module& m) {
  std::vector<std::vector<double>> out;
  for (auto& [name, p] : m.named_parameters()) out.push_back(host_values(p->value));
  return out;
}

std::string temp_path(const std::string& name) { return ::testing::TempDir() + "/" + name; }

TEST(StateDict, NamesShapesAndIndependentCopies) {
  auto model = mlp({3, 4, 2}, 1);
  TensorList sd = state_dict(*model);
  ASSERT_EQ(sd.size(), 4u);
  EXPECT_EQ(sd[0].first, "0.weight");
  EXPECT_EQ(sd[1].first, "0.bias");
  EXPECT_EQ(sd[2].first, "2.weight");
  EXPECT_EQ(sd[3].first, "2.bias");
  EXPECT_EQ(sd[2].second.shape(), (Shape{2, 4}));
  EXPECT_TRUE(sd[0].second.device().is_cpu());
  EXPECT_EQ(host_values(sd[0].second), host_values(model->named_parameters()[0].second->value));
  // a copy: changing it leaves the model alone
  sd[0].second.data<float>()[0] += 1.0f;
  EXPECT_NE(host_values(sd[0].second), host_values(model->named_parameters()[0].second->value));
}

TEST(StateDict, LoadCopiesIntoTheExistingParameters) {
  auto source = mlp({3, 4, 2}, 1), target = mlp({3, 4, 2}, 2);
  ASSERT_NE(values_of(*source), values_of(*target));
  const void* storage = target->named_parameters()[0].second->value.raw_data();
  load_state_dict(*target, state_dict(*source));
  EXPECT_EQ(values_of(*source), values_of(*target));
  EXPECT_EQ(target->named_parameters()[0].second->value.raw_data(), storage);
  load_state_dict(*target, state_dict(*target));  // loading a model into itself is harmless
  EXPECT_EQ(values_of(*source), values_of(*target));
}

TEST(StateDict, LoadConvertsFloat64IntoFloat32AndBack) {
  auto f64 = mlp({3, 4, 2}, 3, DType::Float64);
  auto f32 = mlp({3, 4, 2}, 4);
  load_state_dict(*f32, state_dict(*f64));
  EXPECT_EQ(f32->named_parameters()[0].second->value.dtype(), DType::Float32);
  auto want = values_of(*f64), got = values_of(*f32);
  for (size_t i = 0; i < want.size(); ++i)
    for (size_t j = 0; j < want[i].size(); ++j) EXPECT_EQ(got[i][j], double(float(want[i][j])));
  auto back = mlp({3, 4, 2}, 5, DType::Float64);
  load_state_dict(*back, state_dict(*f32));
  EXPECT_EQ(values_of(*back), values_of(*f32));
}

TEST(StateDict, LoadRejectsMissingAndUnexpectedKeysChangingNothing) {
  auto model = mlp({3, 4, 2}, 6);
  const auto before = values_of(*model);
  TensorList sd = state_dict(*mlp({3, 4, 2}, 7));
  sd.erase(sd.begin() + 1);  // drop 0.bias
  sd.erase(sd.begin() + 2);  // drop 2.bias
  sd.emplace_back("3.weight", Tensor::zeros(Shape{2, 2}));
  sd.emplace_back("extra", Tensor::zeros(Shape{1}));
  EXPECT_THROW(load_state_dict(*model, sd), ValueError);
  const std::string msg = error_message([&] { load_state_dict(*model, sd); });
  EXPECT_THAT(msg, HasSubstr("missing keys \"0.bias\", \"2.bias\""));
  EXPECT_THAT(msg, HasSubstr("unexpected keys \"3.weight\", \"extra\""));
  EXPECT_EQ(values_of(*model), before) << "a failed load changed the model";

  TensorList dup = state_dict(*model);
  dup.push_back(dup[0]);
  EXPECT_THAT(error_message([&] { load_state_dict(*model, dup); }),
              HasSubstr("duplicate keys \"0.weight\""));
}

TEST(StateDict, LoadRejectsMisshapenKeysNamingEveryOneChangingNothing) {
  auto model = mlp({3, 4, 2}, 8);
  const auto before = values_of(*model);
  const TensorList other = state_dict(*mlp({3, 5, 2}, 9));  // 0.weight, 0.bias, 2.weight differ
  EXPECT_THROW(load_state_dict(*model, other), ShapeError);
  const std::string msg = error_message([&] { load_state_dict(*model, other); });
  EXPECT_THAT(msg, HasSubstr("\"0.weight\" is [5, 3] but the model has [4, 3]"));
  EXPECT_THAT(msg, HasSubstr("\"0.bias\" is [5] but the model has [4]"));
  EXPECT_THAT(msg, HasSubstr("\"2.weight\" is [2, 5] but the model has [2, 4]"));
  EXPECT_THAT(msg, Not(HasSubstr("2.bias")));
  EXPECT_EQ(values_of(*model), before);
}

TEST(Weights, SaveLoadRoundTripThroughSafetensors) {
  const std::string path = temp_path("nn_round_trip.safetensors");
  auto saved = mlp({5, 7, 3}, 10);
  save_weights(path, *saved, {{"step", "12"}});

  const SafetensorsFile file = read_safetensors(path);
  EXPECT_EQ(file.metadata.at("format"), "pt");
  EXPECT_EQ(file.metadata.at("minitrain_version"), MINITRAIN_VERSION);  // the writer's
  EXPECT_EQ(file.metadata.at("step"), "12");
  ASSERT_EQ(file.tensors.size(), 4u);
  EXPECT_EQ(file.tensors[0].first, "0.weight");
  EXPECT_EQ(file.tensors[3].first, "2.bias");

  auto loaded = mlp({5, 7, 3}, 11);
  load_weights(path, *loaded);
  EXPECT_EQ(values_of(*loaded), values_of(*saved));  // bit-exact
  std::remove(path.c_str());
}

TEST(Weights, LoadNamesTheFileAndKeepsTheModelOnFailure) {
  const std::string path = temp_path("nn_small.safetensors");
  save_weights(path, *mlp({3, 4, 2}, 12));
  auto wrong = mlp({3, 6, 2}, 13);
  const auto before = values_of(*wrong);
  EXPECT_THROW(load_weights(path, *wrong), ShapeError);
  const std::string msg = error_message([&] { load_weights(path, *wrong); });
  EXPECT_THAT(msg, HasSubstr(path));
  EXPECT_THAT(msg, HasSubstr("\"0.weight\""));
  EXPECT_EQ(values_of(*wrong), before);
  EXPECT_THROW(load_weights(temp_path("no_such_weights.safetensors"), *wrong), IoError);
  std::remove(path.c_str());
}

TEST(Weights, FailedSaveLeavesTheExistingFileIntact) {
  const std::string path = temp_path("nn_keep.safetensors");
  auto model = mlp({3, 4, 2}, 14);
  save_weights(path, *model);
  std::ifstream in(path, std::ios::binary);
  const std::string original((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  in.close();

  // A module whose names clash: write_safetensors refuses it before touching the file.
  struct Clashing : Module {
    Parameter a{Tensor::zeros(Shape{2}), {}, {}}, b{Tensor::zeros(Shape{3}), {}, {}};
    Tensor forward(const Tensor& x) override { return x; }
    Tensor backward(const Tensor& g) override { return g; }
    NamedParameters named_parameters(const std::string& prefix) override {
      return {{prefix + "w", &a}, {prefix + "w", &b}};
    }
    std::string repr() const override { return "Clashing()"; }
  } clashing;
  EXPECT_THROW(save_weights(path, clashing), ValueError);
  std::ifstream again(path, std::ios::binary);
  const std::string now((std::istreambuf_iterator<char>(again)), std::istreambuf_iterator<char>());
  EXPECT_EQ(now, original);
  EXPECT_THROW(save_weights(temp_path("no_such_dir/w.safetensors"), *mlp({3, 2}, 1)), IoError);
  std::remove(path.c_str());
}

// Issue 30: --save-dtype fp16 wrote +inf for a weight beyond 65504 without a word. Refused, naming
// the tensor, the value and where; nothing is written; bfloat16 (float32's range) keeps it.
TEST(Weights, Float16SaveRefusesWeightsBeyondItsRange) {
  const std::string path = temp_path("nn_fp16_overflow.safetensors");
  std::remove(path.c_str());
  auto model = mlp({3, 1}, 15);
  for (auto& [name, p] : model->named_parameters())
    if (name == "0.weight")  // [1, 3]
      p->value.copy_(Tensor::from_vector(std::vector<float>{1.0f, -70000.0f, 3.0f}, {1, 3}));
  const std::string msg = error_message([&] { save_weights(path, *model, {}, DType::Float16); });
  EXPECT_THAT(msg, HasSubstr("tensor '0.weight' holds -70000 at [0, 1]"));
  EXPECT_THAT(msg, HasSubstr("beyond float16's range (65504), which would be saved as -inf"));
  EXPECT_FALSE(std::ifstream(path).good());
  save_weights(path, *model, {}, DType::BFloat16);  // bf16 rounds -70000 to -70144, finite
  const Tensor back = read_safetensors(path, Device::cpu()).at("0.weight");
  EXPECT_EQ(host_values(back)[1], -70144.0);
  std::remove(path.c_str());
}

// tests/fixtures/mlp_3_2_1.safetensors: torch.nn.Sequential(Linear(3, 2), ReLU(), Linear(2, 1)),
// element i of a tensor of layer l = (i + 1) * 0.25 * (l + 1), weights alternating in sign
// (tests/fixtures/make_safetensors_fixtures.py).
TEST(Weights, LoadsTheTorchLayoutFixture) {
  const std::string path = ::minitrain::testing::test_data_dir() + "/mlp_3_2_1.safetensors";
  for (DType dtype : {DType::Float32, DType::Float64}) {
    auto model = mlp(parse_mlp_spec("mlp:3,2,1"), 15, dtype);
    load_weights(path, *model);
    const auto v = values_of(*model);
    EXPECT_EQ(v[0], (std::vector<double>{0.25, -0.5, 0.75, -1.0, 1.25, -1.5}));
    EXPECT_EQ(v[1], (std::vector<double>{0.25, 0.5}));
    EXPECT_EQ(v[2], (std::vector<double>{0.5, -1.0}));
    EXPECT_EQ(v[3], (std::vector<double>{0.5}));
    // x = [1, 2, 3]: hidden = relu([1.75, -2.5]) = [1.75, 0]; out = 0.5 * 1.75 + 0.5 = 1.375
    model->eval();
    const Tensor x = dtype == DType::Float32
                         ? Tensor::from_vector(std::vector<float>{1, 2, 3}, Shape{1, 3})
                         : Tensor::from_vector(std::vector<double>{1, 2, 3}, Shape{1, 3});
    EXPECT_EQ(model->forward(x).item(), 1.375);
  }
}

}  // namespace
}  // namespace minitrain
