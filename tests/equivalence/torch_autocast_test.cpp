// Mixed precision against PyTorch itself: the train_precision_* fixtures are torch 2.15 runs under
// torch.autocast("cpu", dtype=bfloat16 | float16) with float32 master weights and, for float16,
// torch.amp.GradScaler (make_torch_reference.py --precision). minitrain's Trainer runs the same
// model, initial weights, batches and optimizer with Module::set_precision and
// TrainerOptions::loss_scaling, as `minitrain train --precision` does:
//   - the first step's float32 gradients are torch's, element for element but for the odd element
//     whose 16-bit rounding a last-ulp difference of a float32 sum tipped the other way;
//   - over 52 steps the losses and final weights stay nearer torch's 16-bit run than one 16-bit
//     ulp or twice the distance 16-bit arithmetic puts between torch's own 16-bit and float32
//     runs, whichever is larger;
//   - float16 forced to overflow (init scale 2^28, growth every 3 steps) has GradScaler's scale
//     sequence and skipped steps exactly.
// On (real or emulated) GPUs the same.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/safetensors.h"
#include "data/data_loader.h"
#include "data/dataset.h"
#include "nn/mlp.h"
#include "nn/state_dict.h"
#include "optim/make_optimizer.h"
#include "tests/equivalence/torch_fixture.h"
#include "tests/support/test_util.h"
#include "train/trainer.h"

namespace minitrain {
namespace {

using testing::meta;
using testing::with_prefix;

struct AutocastRun {
  std::vector<double> losses, loss_scales, skipped;  // per step
  std::vector<std::pair<std::string, Tensor>> first_grads, weights;
};

/// The fixture's run through the Trainer: --precision as the fixture's, --loss-scale and
/// --loss-scale-growth-interval as its GradScaler's, no shuffle, batches in row order.
AutocastRun train_mixed(const SafetensorsFile& f, Device device) {
  Generator gen(0);  // the weights are overwritten by torch's initial ones
  auto model = make_mlp(parse_mlp_spec("mlp:" + meta(f, "sizes")),
                        parse_activation(meta(f, "activation")), gen, device);
  load_state_dict(*model, with_prefix(f, "init."));
  const DType precision = parse_precision(meta(f, "precision"));
  model->set_precision(precision);
  auto opt = make_optimizer(testing::optimizer_config(f), model->named_parameters());

  DataLoaderOptions lo;
  lo.batch_size = std::stoll(meta(f, "batch_size"));
  lo.shuffle = false;
  lo.device = device;
  DataLoader loader(std::make_shared<TensorDataset>(f.at("X"), f.at("Y")), lo);

  TrainerOptions o;
  o.total_steps = std::stoll(meta(f, "epochs")) * loader.batches_per_epoch();
  MT_CHECK(o.total_steps == f.at("losses").numel(), "the loader gives ", o.total_steps,
           " steps but torch took ", f.at("losses").numel());
  if (precision == DType::Float16) {
    GradScalerOptions s;
    s.init_scale = testing::meta_double(f, "init_scale");
    s.growth_interval = std::stoll(meta(f, "growth_interval"));
    o.loss_scaling = s;
  }
  AutocastRun r;
  o.on_step = [&](const StepStats& s) {
    if (s.step == 1)  // the optimizer has stepped; the (unscaled) gradients are still there
      for (const auto& [name, p] : model->named_parameters())
        r.first_grads.emplace_back(name, p->grad.to(Device::cpu()).clone());  // not a live handle
    r.losses.push_back(s.loss);
    r.loss_scales.push_back(std::isnan(s.loss_scale) ? 1.0 : s.loss_scale);
    r.skipped.push_back(s.skipped ? 1.0 : 0.0);
  };
  Trainer(*model, *opt, loader, o).run();
  r.weights = state_dict(*model);
  return r;
}

// max over steps of |a - b| / |b|
double max_relative(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
    worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
  return worst;
}

double max_abs_difference(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = testing::host_values(a), y = testing::host_values(b);
  double worst = 0;
  for (std::size_t i = 0; i < x.size() && i < y.size(); ++i)
    worst = std::max(worst, std::fabs(x[i] - y[i]));
  return worst;
}

// Note [autocast tolerances]: torch and minitrain round at the same places (each Linear's output,
// dX, dW and db once from a float32 sum; activations computed in float32 on 16-bit values and
// rounded once, tanh's derivative from the rounded output; the loss in float32), so they part
// only where two float32 sums of a GEMM (or erf, tanh) differ in the last ulp and that ulp
// straddles a 16-bit rounding boundary: about 2^-13 (float16) or 2^-16 (bfloat16) of the
// roundings. Measured on the CPU: the first step's gradients are torch's bit for bit, and the
// losses agree to float32 rounding (2e-7) until the first such flip (steps 16 to 23, none in
// the bf16 SGD case); from there an element that rounded the other way moves by a whole 16-bit
// ulp, and Adam's normalisation (and fast momentum) carry it on as any 16-bit perturbation, to
// 4.5e-3 (bf16 Adam) relative by step 52: the size of the 16-bit-vs-float32 distance itself. So
// the whole-run bound is twice that distance (or one ulp, see relative_ulp), and what
// pins the semantics down is the first step: a formula that rounds elsewhere (tanh's derivative
// from the unrounded output, torch's CPU float16 sigmoid rounding after each operation) changes
// a third of the gradient elements, where a flip changes a few.
constexpr double kFlippedShare = 0.02;  // of a gradient's elements that may differ from torch's

// One ulp of the 16-bit type relative to the value (2^-7 bfloat16, 2^-10 float16): the most one
// rounding the other way moves a number. In float16, whose rounding is 8 times finer, the
// 16-bit-vs-float32 distance of an SGD run can be smaller than one flip's, so the whole-run
// bounds are the larger of twice that distance and one ulp.
double relative_ulp(DType precision) { return precision == DType::BFloat16 ? 0x1p-7 : 0x1p-10; }

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : testing::host_values(t)) m = std::max(m, std::fabs(v));
  return m;
}

void expect_first_gradients_are_torchs(const SafetensorsFile& f, const AutocastRun& got,
                                       DType precision) {
  const auto want = with_prefix(f, "grad1.");
  ASSERT_EQ(got.first_grads.size(), want.size());
  // A flip moves an element by about one 16-bit ulp of the gradient's scale.
  const double ulp = relative_ulp(precision);
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(got.first_grads[i].first, want[i].first);
    const std::vector<double> g = testing::host_values(got.first_grads[i].second),
                              w = testing::host_values(want[i].second);
    ASSERT_EQ(g.size(), w.size());
    double scale = 0;
    for (double v : w) scale = std::max(scale, std::fabs(v));
    ASSERT_GT(scale, 0.0) << want[i].first;
    std::size_t differ = 0;
    for (std::size_t j = 0; j < g.size(); ++j) {
      differ += g[j] != w[j];
      EXPECT_LE(std::fabs(g[j] - w[j]), 4 * ulp * scale) << want[i].first << "[" << j << "]";
    }
    EXPECT_LE(double(differ), kFlippedShare * double(g.size()))
        << want[i].first << ": " << differ << " of " << g.size() << " elements differ";
  }
}

class TorchAutocast : public testing::DeviceTest {};

void expect_matches_torch_autocast(const std::string& name, Device device) {
  SCOPED_TRACE(name);
  const SafetensorsFile f =
      read_safetensors(testing::torch_fixture("train_" + name + ".safetensors"));
  const AutocastRun got = train_mixed(f, device);
  const DType precision = parse_precision(meta(f, "precision"));
  expect_first_gradients_are_torchs(f, got, precision);
  const double ulp = relative_ulp(precision);

  const std::vector<double> want = testing::host_values(f.at("losses"));
  const std::vector<double> fp32 = testing::host_values(f.at("losses_fp32"));
  ASSERT_EQ(got.losses.size(), want.size());
  const double to_torch = max_relative(got.losses, want);
  const double torch_to_fp32 = max_relative(fp32, want);
  std::printf("%s on %s: losses within %.2e of torch's (its float32 run: %.2e)\n", name.c_str(),
              device.str().c_str(), to_torch, torch_to_fp32);
  EXPECT_LE(to_torch, std::max(2 * torch_to_fp32, ulp));

  const auto want_weights = with_prefix(f, "final."), fp32_weights = with_prefix(f, "final_fp32.");
  ASSERT_EQ(got.weights.size(), want_weights.size());
  for (std::size_t i = 0; i < want_weights.size(); ++i) {
    const double d = max_abs_difference(got.weights[i].second, want_weights[i].second);
    const double d32 = max_abs_difference(fp32_weights[i].second, want_weights[i].second);
    EXPECT_LE(d, std::max(2 * d32, ulp * max_abs(want_weights[i].second)))
        << "final " << want_weights[i].first;
  }
}

TEST_P(TorchAutocast, Bfloat16TrainsAsTorchAutocast) {
  for (const char* c : {"precision_bf16_adam_gelu", "precision_bf16_sgd_momentum_tanh"})
    expect_matches_torch_autocast(c, device());
}

TEST_P(TorchAutocast, Float16WithGradScalerTrainsAsTorch) {
  for (const char* c : {"precision_fp16_sgd_momentum_tanh", "precision_fp16_adamw_relu"})
    expect_matches_torch_autocast(c, device());
}

// GradScaler's whole rule on a run that overflows: the first steps overflow float16 in backward
// and are skipped while the scale halves; then every 3 finite steps the scale doubles until it
// overflows again. Each step's scale and skip must be torch's exactly.
TEST_P(TorchAutocast, Float16ForcedToOverflowHasGradScalersScalesAndSkips) {
  const SafetensorsFile f = read_safetensors(
      testing::torch_fixture("train_precision_fp16_scaler_overflow_gelu_tanh.safetensors"));
  const AutocastRun got = train_mixed(f, device());
  const std::vector<double> scales = testing::host_values(f.at("loss_scale"));
  const std::vector<double> skipped = testing::host_values(f.at("skipped"));
  ASSERT_EQ(got.loss_scales.size(), scales.size());
  double skips = 0, growths = 0;
  for (std::size_t i = 0; i < scales.size(); ++i) {
    EXPECT_EQ(got.loss_scales[i], scales[i]) << "step " << i + 1;
    EXPECT_EQ(got.skipped[i], skipped[i]) << "step " << i + 1;
    skips += skipped[i];
    growths += i > 0 && scales[i] > scales[i - 1];
  }
  // The fixture exercises the rule: many skips, and growth after finite steps.
  EXPECT_GE(skips, 10);
  EXPECT_GE(growths, 3);
  // Once the scale fits, the run learns as torch's does.
  const std::vector<double> want = testing::host_values(f.at("losses"));
  EXPECT_LE(max_relative(got.losses, want),
            2 * max_relative(testing::host_values(f.at("losses_fp32")), want));
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(TorchAutocast);

}  // namespace
}  // namespace minitrain
