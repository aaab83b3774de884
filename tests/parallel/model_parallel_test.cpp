// ModelParallel (GPipe): the split (balanced by parameters, or given), the names, and above all
// agreement with one device: outputs, gradients after backward, and weights after several SGD and
// Adam steps, for every number of stages and micro-batches, uneven and empty micro-batches
// included. CPU stages are threads, so the whole schedule runs here; the Cuda case needs 2 GPUs.

#include "parallel/model_parallel.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "core/stream.h"
#include "nn/linear.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/optimizer.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_max_abs;
using testing::random_tensor;

// Two copies of the same MLP: make_mlp draws the weights in order from a generator seeded alike.
std::unique_ptr<Sequential> mlp(const std::vector<int64_t>& sizes, uint64_t seed = 7,
                                Activation act = Activation::Tanh) {
  Generator gen(seed);
  return make_mlp(sizes, act, gen);
}

const std::vector<int64_t> kSizes = {6, 16, 12, 10, 3};  // 7 layers: L, act, L, act, L, act, L

std::unique_ptr<ModelParallel> split(const std::vector<int64_t>& sizes, int stages, int micro,
                                     std::vector<Device> devices = {Device::cpu()}) {
  return std::make_unique<ModelParallel>(mlp(sizes), stages, micro, std::move(devices));
}

// Float32 tolerances. Each output row is computed by the same per-row dot products whatever the
// micro-batch, so outputs agree to rounding; a weight gradient is a sum over rows that the
// pipeline adds in M partial GEMMs instead of one, a different summation order of the same
// terms, hence a few ulps relative (rtol 1e-5) and atol for terms that cancel to near zero.
constexpr double kAtol = 1e-6, kRtol = 1e-5;

TEST(ModelParallelForward, MatchesTheUnsplitModel) {
  auto ref = mlp(kSizes);
  for (int64_t rows : {7, 3, 1}) {  // 7: uneven splits; 3 and 1: empty micro-batches for M > rows
    Tensor x = random_tensor({rows, 6}, 11);
    Tensor want = ref->forward(x);
    for (int s = 1; s <= 4; ++s)
      for (int m = 1; m <= 5; ++m) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " stages " + std::to_string(s) +
                     " micro-batches " + std::to_string(m));
        auto mp = split(kSizes, s, m);
        Tensor got = mp->forward(x);
        ASSERT_GT(host_max_abs(got), 0.0);
        EXPECT_EQ(got.shape(), want.shape());
        EXPECT_ALLCLOSE(got, want, kAtol, kRtol);
      }
  }
}

// Runs forward, mean MSE on the full output, backward; returns dL/dx.
Tensor loss_backward(Module& model, const Tensor& x, const Tensor& target) {
  model.zero_grad();
  MSELoss loss;
  loss.forward(model.forward(x), target);
  return model.backward(loss.backward());
}

void expect_same_grads(Module& got, Module& want) {
  NamedParameters g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    SCOPED_TRACE(g[i].first);
    ASSERT_EQ(g[i].first, w[i].first);
    ASSERT_TRUE(g[i].second->grad.defined());
    EXPECT_ALLCLOSE(g[i].second->grad, w[i].second->grad, kAtol, kRtol);
  }
}

TEST(ModelParallelBackward, GradientsEqualOneDevice) {
  auto ref = mlp(kSizes);
  for (int64_t rows : {7, 3}) {
    Tensor x = random_tensor({rows, 6}, 21), t = random_tensor({rows, 3}, 22);
    Tensor want_dx = loss_backward(*ref, x, t);
    for (int s = 1; s <= 4; ++s)
      for (int m = 1; m <= 5; ++m) {
        SCOPED_TRACE("rows " + std::to_string(rows) + " stages " + std::to_string(s) +
                     " micro-batches " + std::to_string(m));
        auto mp = split(kSizes, s, m);
        Tensor dx = loss_backward(*mp, x, t);
        ASSERT_TRUE(dx.defined());
        ASSERT_GT(host_max_abs(dx), 0.0);
        EXPECT_ALLCLOSE(dx, want_dx, kAtol, kRtol);
        expect_same_grads(*mp, *ref);
      }
  }
}

TEST(ModelParallelBackward, SkipsInputGradLikeTheModel) {
  auto ref = mlp(kSizes);
  auto model = mlp(kSizes);
  ref->set_needs_input_grad(false);
  model->set_needs_input_grad(false);
  ModelParallel mp(std::move(model), 3, 4, {Device::cpu()});
  Tensor x = random_tensor({9, 6}, 31), t = random_tensor({9, 3}, 32);
  EXPECT_FALSE(loss_backward(*ref, x, t).defined());
  EXPECT_FALSE(loss_backward(mp, x, t).defined());
  expect_same_grads(mp, *ref);
}

TEST(ModelParallelBackward, NeedsATrainingForward) {
  auto mp = split(kSizes, 2, 2);
  EXPECT_THAT(error_message([&] {
                mp->backward(random_tensor({4, 3}, 1));
              }),
              HasSubstr("no training-mode forward"));
  mp->forward(random_tensor({4, 6}, 2));
  EXPECT_THAT(error_message([&] { mp->backward(random_tensor({5, 3}, 1)); }), HasSubstr("4 rows"));
}

// `--parallel mp --stages 3 --micro-batches 5` against one device on the same global batch.
// rtol 1e-5: every step's gradient agrees to a few ulps (above); SGD adds lr * g, so weights keep
// that relative error; Adam divides m by sqrt(v) of the same slightly perturbed g, and a handful
// of steps keeps the drift near float32 epsilon (~1e-7) times the step count, well inside 1e-5.
void train_and_compare(bool adam, std::vector<Device> devices = {Device::cpu()},
                       double atol = kAtol, double rtol = kRtol) {
  const std::vector<int64_t> sizes = {8, 24, 24, 24, 4};
  auto ref = mlp(sizes, 3, Activation::ReLU);
  ModelParallel mp(mlp(sizes, 3, Activation::ReLU), 3, 5, devices);
  // zero_grad, the loss and the optimizer run on this thread's streams, the stages on their
  // workers' streams. The input's device is waited for anyway (the input is copied there); the
  // others, slowed down, are overtaken by the stages unless the pipeline waits for them.
  testing::SlowCallerStreams slow(std::vector<Device>(devices.begin() + 1, devices.end()), 20000);
  std::unique_ptr<Optimizer> opt_ref, opt_mp;
  if (adam) {
    AdamOptions o;
    o.lr = 1e-2;
    opt_ref = std::make_unique<Adam>(ref->named_parameters(), o);
    opt_mp = std::make_unique<Adam>(mp.named_parameters(), o);
  } else {
    SGDOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    opt_ref = std::make_unique<SGD>(ref->named_parameters(), o);
    opt_mp = std::make_unique<SGD>(mp.named_parameters(), o);
  }
  for (int step = 0; step < 6; ++step) {
    Tensor x = random_tensor({23, 8}, 100 + step), t = random_tensor({23, 4}, 200 + step);
    loss_backward(*ref, x, t);
    loss_backward(mp, x.to(devices.front()), t.to(mp.stage_device(2)));
    opt_ref->step();
    opt_mp->step();
  }
  NamedParameters g = mp.named_parameters(), w = ref->named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    SCOPED_TRACE(g[i].first);
    EXPECT_ALLCLOSE(g[i].second->value.to(Device::cpu()), w[i].second->value, atol, rtol);
  }
}

TEST(ModelParallelTraining, SgdMatchesOneDevice) { train_and_compare(false); }
TEST(ModelParallelTraining, AdamMatchesOneDevice) { train_and_compare(true); }

TEST(ModelParallelSplit, KeepsTheUnsplitNames) {
  auto ref = mlp(kSizes);
  for (int s = 1; s <= 4; ++s) {
    auto mp = split(kSizes, s, 2);
    NamedParameters got = mp->named_parameters("model."), want = ref->named_parameters("model.");
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].first, want[i].first);
  }
  EXPECT_EQ(split(kSizes, 3, 2)->named_parameters().front().first, "0.weight");
  EXPECT_EQ(split(kSizes, 3, 2)->named_parameters().back().first, "6.bias");
}

TEST(ModelParallelSplit, BalancesByParameterCount) {
  // mlp:8,64,64,64,2: Linear sizes 576, 4160, 4160, 130 at layers 0, 2, 4, 6 (activations after
  // each but the last). 3 stages: {0,1}{2,3}{4,5,6} has the smallest largest stage (4290).
  const std::vector<int64_t> sizes = {8, 64, 64, 64, 2};
  EXPECT_EQ(split(sizes, 1, 1)->stage_starts(), (std::vector<int>{0}));
  EXPECT_EQ(split(sizes, 2, 1)->stage_starts(), (std::vector<int>{0, 4}));
  EXPECT_EQ(split(sizes, 3, 1)->stage_starts(), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(split(sizes, 4, 1)->stage_starts(), (std::vector<int>{0, 2, 4, 6}));
  // More stages than Linear blocks: single layers, every stage still non-empty.
  std::vector<int> starts = split(sizes, 7, 1)->stage_starts();
  EXPECT_EQ(starts, (std::vector<int>{0, 1, 2, 3, 4, 5, 6}));
}

TEST(ModelParallelSplit, TakesExplicitBoundariesAndDevices) {
  ModelParallel mp(mlp(kSizes), 3, 2, {Device::cpu(), Device::cpu()}, {1, 5});
  EXPECT_EQ(mp.stage_starts(), (std::vector<int>{0, 1, 5}));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(mp.stage_device(s), Device::cpu());
  EXPECT_EQ(mp.stages(), 3);
  EXPECT_EQ(mp.micro_batches(), 2);
  auto ref = mlp(kSizes);
  Tensor x = random_tensor({5, 6}, 3);
  EXPECT_ALLCLOSE(mp.forward(x), ref->forward(x), kAtol, kRtol);
  EXPECT_THAT(mp.repr(), HasSubstr("stage 2 on cpu"));
}

TEST(ModelParallelSplit, BubbleFraction) {
  for (int s = 1; s <= 4; ++s)
    for (int m : {1, 4, 8}) {
      auto mp = split(kSizes, s, m);
      EXPECT_DOUBLE_EQ(mp->bubble_fraction(), double(s - 1) / double(m + s - 1));
    }
}

TEST(ModelParallelSplit, BadArgumentsAreValueErrors) {
  auto make = [](int s, int m, std::vector<Device> d, std::vector<int> b = {}) {
    return [=] { ModelParallel mp(mlp(kSizes), s, m, d, b); };
  };
  const std::vector<Device> cpu = {Device::cpu()};
  EXPECT_THROW(make(0, 1, cpu)(), ValueError);
  EXPECT_THAT(error_message(make(0, 1, cpu)), HasSubstr("stages = 0"));
  EXPECT_THAT(error_message(make(8, 1, cpu)), HasSubstr("stages = 8"));
  EXPECT_THROW(make(2, 0, cpu)(), ValueError);
  EXPECT_THAT(error_message(make(2, 0, cpu)), HasSubstr("micro_batches = 0"));
  EXPECT_THROW(make(2, 1, {})(), ValueError);
  EXPECT_THAT(error_message(make(2, 1, {})), HasSubstr("devices"));
  // Too few for 3 stages, repeated, 0, past the last layer, decreasing.
  const std::vector<std::pair<int, std::vector<int>>> bad = {
      {3, {1}}, {3, {3, 3}}, {2, {0}}, {2, {7}}, {3, {5, 2}}};
  for (const auto& [stages, b] : bad) {
    EXPECT_THROW(make(stages, 1, cpu, b)(), ValueError);
    EXPECT_THAT(error_message(make(stages, 1, cpu, b)), HasSubstr("boundaries"));
  }
  EXPECT_THROW([&] { ModelParallel mp(nullptr, 1, 1, cpu); }(), ValueError);
  EXPECT_THROW(split(kSizes, 2, 2)->to(Device::cpu()), DeviceError);
}

// A layer that fails: the exception thrown on a stage thread reaches the caller.
class FailingLayer final : public Module {
 public:
  Tensor forward(const Tensor&) override { MT_THROW(ValueError, "failing layer: boom"); }
  Tensor backward(const Tensor& g) override { return g; }
  std::string repr() const override { return "Failing()"; }
};

TEST(ModelParallelThreads, StageExceptionsReachTheCaller) {
  auto model = mlp(kSizes);
  model->add(std::make_unique<FailingLayer>());
  ModelParallel mp(std::move(model), 3, 4, {Device::cpu()}, {2, 7});
  EXPECT_THAT(error_message([&] {
                mp.forward(random_tensor({8, 6}, 1));
              }),
              HasSubstr("failing layer: boom"));
  // A shape error in stage 0 (6 features expected) comes back as the ShapeError it is.
  EXPECT_THROW(mp.forward(random_tensor({8, 5}, 1)), ShapeError);
  // and the workers still run (the destructor then stops them).
  EXPECT_THROW(mp.forward(random_tensor({8, 6}, 1)), ValueError);
}

TEST(ModelParallelThreads, EvalModeKeepsNoInputs) {
  auto mp = split(kSizes, 3, 3);
  mp->eval();
  auto ref = mlp(kSizes);
  ref->eval();
  Tensor x = random_tensor({6, 6}, 5);
  EXPECT_ALLCLOSE(mp->forward(x), ref->forward(x), kAtol, kRtol);
  EXPECT_THROW(mp->backward(random_tensor({6, 3}, 1)), Error);
}

TEST(SequentialReleaseLayers, HandsOverTheLayersInOrder) {
  auto model = mlp({4, 5, 2});
  std::vector<std::unique_ptr<Module>> layers = model->release_layers();
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_EQ(model->size(), 0u);
  EXPECT_NE(dynamic_cast<Linear*>(layers[0].get()), nullptr);
  EXPECT_NE(dynamic_cast<Linear*>(layers[2].get()), nullptr);
  EXPECT_EQ(model->repr(), "Sequential()");
}

// Stages on two GPUs: peer copies between the stages; same gradients as one CPU model.
TEST(ModelParallelCuda, TwoGpusMatchOneDevice) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  auto ref = mlp(kSizes);
  ModelParallel mp(mlp(kSizes), 4, 3, {Device::cuda(0), Device::cuda(1)});
  EXPECT_EQ(mp.stage_device(1), Device::cuda(1));
  Tensor x = random_tensor({10, 6}, 41), t = random_tensor({10, 3}, 42);
  Tensor want_dx = loss_backward(*ref, x, t);
  mp.zero_grad();
  MSELoss loss;
  Tensor y = mp.forward(x.to(Device::cuda(0)));
  EXPECT_EQ(y.device(), Device::cuda(1));
  loss.forward(y, t.to(Device::cuda(1)));
  Tensor dx = mp.backward(loss.backward());
  EXPECT_EQ(dx.device(), Device::cuda(0));
  // cuBLAS and the CPU GEMM round differently: a looser float32 tolerance.
  EXPECT_ALLCLOSE(dx.to(Device::cpu()), want_dx, 1e-5, 1e-4);
  NamedParameters g = mp.named_parameters(), w = ref->named_parameters();
  for (std::size_t i = 0; i < g.size(); ++i)
    EXPECT_ALLCLOSE(g[i].second->grad.to(Device::cpu()), w[i].second->grad, 1e-5, 1e-4);
}

// Training steps with the stages on 2 and on 3 GPUs (three stages: on 2 GPUs the third wraps
// to cuda:0), SGD and Adam on this thread as the Trainer does, against one CPU model. The ladder
// GEMM rounds unlike the CPU's: rtol 1e-4 over six steps.
TEST(ModelParallelCuda, TrainingOnTwoAndThreeGpusMatchesOneDevice) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  for (int gpus = 2; gpus <= std::min(3, cuda_device_count()); ++gpus) {
    std::vector<Device> devices;
    for (int i = 0; i < gpus; ++i) devices.push_back(Device::cuda(i));
    for (bool adam : {false, true}) {
      SCOPED_TRACE(std::to_string(gpus) + " GPUs, " + (adam ? "Adam" : "SGD"));
      train_and_compare(adam, devices, 1e-5, 1e-4);
    }
  }
}

// The caller's optimizer step reads the stages' gradients and weights on the caller's streams;
// destroying the model frees them (back to the stages' caches, marked unusable there at once: the
// stage threads and their streams are gone). Its destructor must wait for that step: with the
// caller's cuda:1 stream slowed down, the step is still queued when the model goes, and on
// emulated GPUs AddressSanitizer reported the step's read of a freed gradient
// (`minitrain train --parallel mp` failed so in 8 of 10 runs).
TEST(ModelParallelCuda, DestroyedWhileTheCallersOptimizerStepIsQueuedFreesNothingItReads) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count() << " "
                 << cuda_unavailable_reason();
  const std::vector<int64_t> sizes = {4, 64, 64, 1};
  auto mp = std::make_unique<ModelParallel>(mlp(sizes, 3, Activation::ReLU), 2, 4,
                                            std::vector<Device>{Device::cuda(0), Device::cuda(1)});
  AdamOptions o;
  o.lr = 1e-2;
  Adam opt(mp->named_parameters(), o);
  loss_backward(*mp, random_tensor({16, 4}, 7).to(Device::cuda(0)),
                random_tensor({16, 1}, 8).to(Device::cuda(1)));
  testing::SlowCallerStreams slow({Device::cuda(1)}, 200000);
  opt.step();  // queued on this thread's cuda:1 stream, behind 0.2 s of other work
  mp.reset();
  synchronize(Device::cuda(1));
}

}  // namespace
}  // namespace minitrain
