// Every loss against PyTorch itself: tests/fixtures/torch_reference/loss_reference.json holds
// torch 2.15's losses and gradients (float64) for each loss, setting and reduction, written by
// make_loss_reference.py from closed-form inputs. make_loss with the same settings must give the
// same numbers, in float64 on every device (the CUDA kernels on the emulated GPUs).

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nn/loss.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::host_values;
using testing::tensor_of;

nlohmann::json reference() {
  std::ifstream in(::minitrain::testing::test_data_dir() + "/torch_reference/loss_reference.json");
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

std::vector<double> numbers(const nlohmann::json& list) {
  std::vector<double> v;
  for (const auto& x : list) v.push_back(x.is_null() ? std::nan("") : x.get<double>());
  return v;
}

// Equal within float64 rounding of sums of a few dozen terms; NaN where torch has NaN.
void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: got " << got[i];
      continue;
    }
    EXPECT_NEAR(got[i], want[i], 1e-12 * (1 + std::fabs(want[i]))) << what << " [" << i << "]";
  }
}

class TorchLossParity : public testing::DeviceTest {};

TEST_P(TorchLossParity, EveryLossSettingAndReductionMatchesTorch) {
  const nlohmann::json ref = reference();
  ASSERT_GE(ref["cases"].size(), 80u);
  for (const nlohmann::json& c : ref["cases"]) {
    LossOptions o;
    o.name = c["loss"].get<std::string>();
    o.reduction = parse_reduction(c["reduction"].get<std::string>());
    const nlohmann::json& opt = c["options"];
    if (opt.contains("beta")) o.beta = opt["beta"];
    if (opt.contains("delta")) o.delta = opt["delta"];
    if (opt.contains("label_smoothing")) o.label_smoothing = opt["label_smoothing"];
    if (opt.contains("ignore_index")) o.ignore_index = opt["ignore_index"];
    if (opt.contains("class_weights")) o.class_weights = numbers(opt["class_weights"]);
    if (opt.contains("pos_weight")) o.pos_weight = numbers(opt["pos_weight"]);
    if (opt.contains("log_target")) o.log_target = opt["log_target"];
    if (opt.contains("log_input")) o.log_input = opt["log_input"];
    const std::vector<int64_t> dims = c["shape"].get<std::vector<int64_t>>();
    const Shape shape(dims);
    const std::vector<double> target = numbers(c["target"]);
    const Shape target_shape =
        o.name == "cross_entropy" ? Shape({static_cast<int64_t>(target.size())}) : shape;
    const std::string what =
        o.name + " " + c["reduction"].get<std::string>() + " " + opt.dump() + " " + shape.str();
    const Tensor pred = tensor_of(numbers(c["pred"]), shape, device(), DType::Float64);
    const Tensor tgt = tensor_of(target, target_shape, device(), DType::Float64);
    auto loss = make_loss(o);
    const Tensor value = loss->forward(pred, tgt);
    const Tensor grad = loss->backward();
    expect_close(host_values(value), numbers(c["loss_value"]), what + " loss");
    expect_close(host_values(grad), numbers(c["grad"]), what + " grad");
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(TorchLossParity);

}  // namespace
}  // namespace minitrain
