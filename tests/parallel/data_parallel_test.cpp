// DataParallel against one device: the same weights after several steps on the same global
// batches (even, uneven and smaller-than-replicas splits), replicas kept bit-identical, and the
// errors a wrong use gets.
//
// Tolerance: the one-device gradient is one GEMM over the batch; DataParallel's is the sum of R
// partial GEMMs, so the two differ by float32 summation order only (a few ulp per step). rtol 1e-5
// with atol 1e-6 (for weights near 0) covers a handful of Adam/SGD steps on these small models.

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/generator.h"
#include "nn/mlp.h"
#include "nn/mse_loss.h"
#include "optim/make_optimizer.h"
#include "parallel/data_parallel.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

constexpr double kAtol = 1e-6, kRtol = 1e-5;
const std::vector<int64_t> kSizes = {5, 16, 8, 3};

std::unique_ptr<Sequential> mlp(uint64_t seed, Device d, bool needs_input_grad) {
  Generator gen(seed);
  auto m = make_mlp(kSizes, Activation::Tanh, gen, d);
  m->set_needs_input_grad(needs_input_grad);
  return m;
}

DataParallel::ReplicaFactory factory(uint64_t seed, bool needs_input_grad = false) {
  return [=](Device d) -> std::unique_ptr<Module> { return mlp(seed, d, needs_input_grad); };
}

// One training step: forward, MSE, backward, update.
double step(Module& m, Optimizer& opt, const Tensor& x, const Tensor& y) {
  m.zero_grad();
  MSELoss loss;
  const double l = loss.forward(m.forward(x), y).item();
  m.backward(loss.backward());
  opt.step();
  return l;
}

void expect_same_weights(Module& got, Module& want, double atol, double rtol) {
  NamedParameters g = got.named_parameters(), w = want.named_parameters();
  ASSERT_EQ(g.size(), w.size());
  for (std::size_t i = 0; i < g.size(); ++i) {
    EXPECT_EQ(g[i].first, w[i].first);
    EXPECT_ALLCLOSE(g[i].second->value, w[i].second->value, atol, rtol) << g[i].first;
  }
}

void expect_replicas_identical(DataParallel& dp) {
  NamedParameters p0 = dp.replica(0).named_parameters();
  for (int r = 1; r < dp.replicas(); ++r) {
    NamedParameters pr = dp.replica(r).named_parameters();
    for (std::size_t i = 0; i < p0.size(); ++i)
      EXPECT_EQ(testing::host_values(pr[i].second->value),
                testing::host_values(p0[i].second->value))
          << "replica " << r << " " << pr[i].first;
  }
}

OptimizerConfig sgd_momentum() {
  OptimizerConfig oc;
  oc.name = "sgd";
  oc.lr = 0.05;
  oc.momentum = 0.9;
  return oc;
}

OptimizerConfig adam() {
  OptimizerConfig oc;
  oc.name = "adam";
  oc.lr = 0.01;
  return oc;
}

TEST(DataParallel, BroadcastsReplicaZerosWeightsAtStart) {
  int built = 0;
  // Each replica initialised from another seed: after construction all hold replica 0's weights.
  DataParallel dp([&](Device d) -> std::unique_ptr<Module> { return mlp(100 + built++, d, false); },
                  {Device::cpu(), Device::cpu(), Device::cpu()});
  ASSERT_EQ(dp.replicas(), 3);
  expect_replicas_identical(dp);
  auto ref = mlp(100, Device::cpu(), false);
  expect_same_weights(dp, *ref, 0, 0);
  EXPECT_EQ(dp.named_parameters().front().first, "0.weight");
}

TEST(DataParallel, ForwardAndBackwardMatchOneDevice) {
  const std::vector<Device> devices(4, Device::cpu());
  DataParallel dp(factory(7, /*needs_input_grad=*/true), devices);
  auto ref = mlp(7, Device::cpu(), true);
  for (int64_t n : {1, 3, 4, 10, 13}) {  // fewer rows than replicas, even, uneven
    const Tensor x = testing::random_tensor(Shape({n, kSizes.front()}), 11 + n);
    const Tensor g = testing::random_tensor(Shape({n, kSizes.back()}), 23 + n);
    dp.zero_grad();
    ref->zero_grad();
    const Tensor y = dp.forward(x), y_ref = ref->forward(x);
    ASSERT_GT(testing::host_max_abs(y), 0.0);
    // Row-wise, but the GEMM's kernel path depends on the row count: last-ulp differences.
    EXPECT_ALLCLOSE(y, y_ref, kAtol, kRtol) << n << " rows";
    const Tensor dx = dp.backward(g), dx_ref = ref->backward(g);
    ASSERT_TRUE(dx.defined());
    EXPECT_ALLCLOSE(dx, dx_ref, kAtol, kRtol) << n << " rows";
    NamedParameters p = dp.named_parameters(), q = ref->named_parameters();
    for (std::size_t i = 0; i < p.size(); ++i)
      EXPECT_ALLCLOSE(p[i].second->grad, q[i].second->grad, kAtol, kRtol)
          << n << " rows, " << p[i].first;
  }
}

TEST(DataParallel, BackwardReturnsUndefinedWhenReplicasSkipInputGradients) {
  DataParallel dp(factory(3), {Device::cpu(), Device::cpu()});
  const Tensor x = testing::random_tensor(Shape({5, kSizes.front()}), 1);
  dp.forward(x);
  EXPECT_FALSE(dp.backward(testing::random_tensor(Shape({5, kSizes.back()}), 2)).defined());
}

// The "Done when": 4 replicas give one device's weights on the same global batches,
// including uneven splits and a partial last batch, and the replicas stay identical.
TEST(DataParallel, FourReplicasMatchOneDeviceOverSeveralStepsWithUnevenBatches) {
  for (const OptimizerConfig& oc : {sgd_momentum(), adam()}) {
    SCOPED_TRACE(oc.name);
    DataParallel dp(factory(42), std::vector<Device>(4, Device::cpu()));
    auto ref = mlp(42, Device::cpu(), false);
    std::unique_ptr<Optimizer> dp_opt = dp.make_optimizer(oc);
    std::unique_ptr<Optimizer> ref_opt = make_optimizer(oc, ref->named_parameters());
    EXPECT_EQ(dp_opt->name(), oc.name);
    const int64_t batches[] = {10, 10, 7, 12, 3, 2, 9};  // 10 % 4 != 0; 3, 2 < 4 replicas
    uint32_t seed = 1;
    for (int64_t n : batches) {
      const Tensor x = testing::random_tensor(Shape({n, kSizes.front()}), seed++);
      const Tensor y = testing::random_tensor(Shape({n, kSizes.back()}), seed++);
      const double l = step(dp, *dp_opt, x, y), l_ref = step(*ref, *ref_opt, x, y);
      EXPECT_NEAR(l, l_ref, 1e-5 * std::abs(l_ref) + 1e-7);
    }
    EXPECT_EQ(dp_opt->steps(), 7);
    expect_same_weights(dp, *ref, kAtol, kRtol);
    expect_replicas_identical(dp);
  }
}

TEST(DataParallel, OptimizerPropagatesLrAndStateToEveryReplica) {
  DataParallel dp(factory(5), std::vector<Device>(3, Device::cpu()));
  std::unique_ptr<Optimizer> opt = dp.make_optimizer(adam());
  auto ref = mlp(5, Device::cpu(), false);
  std::unique_ptr<Optimizer> ref_opt = make_optimizer(adam(), ref->named_parameters());
  const Tensor x = testing::random_tensor(Shape({8, kSizes.front()}), 9);
  const Tensor y = testing::random_tensor(Shape({8, kSizes.back()}), 10);
  step(dp, *opt, x, y);
  step(*ref, *ref_opt, x, y);
  opt->set_lr(0.002);
  ref_opt->set_lr(0.002);
  EXPECT_EQ(opt->lr(), 0.002);
  EXPECT_EQ(opt->state_scalars().at("lr"), ref_opt->state_scalars().at("lr"));
  // State: replica 0's, saved and loaded into every replica's optimizer.
  const auto tensors = opt->state_tensors();
  const auto scalars = opt->state_scalars();
  EXPECT_EQ(tensors.size(), ref_opt->state_tensors().size());
  std::unique_ptr<Optimizer> fresh = dp.make_optimizer(adam());
  fresh->load_state(tensors, scalars);
  EXPECT_EQ(fresh->lr(), 0.002);
  EXPECT_EQ(fresh->steps(), 1);
  step(dp, *fresh, x, y);
  step(*ref, *ref_opt, x, y);
  expect_same_weights(dp, *ref, kAtol, kRtol);
  expect_replicas_identical(dp);
}

// Gradient clipping (or any change the caller makes to replica 0's gradients between backward
// and step) reaches every replica: the step copies replica 0's gradients first.
TEST(DataParallel, StepUsesReplicaZerosGradientsAsTheCallerLeftThem) {
  DataParallel dp(factory(8), std::vector<Device>(2, Device::cpu()));
  std::unique_ptr<Optimizer> opt = dp.make_optimizer(sgd_momentum());
  const Tensor x = testing::random_tensor(Shape({6, kSizes.front()}), 3);
  dp.zero_grad();
  dp.forward(x);
  dp.backward(testing::random_tensor(Shape({6, kSizes.back()}), 4));
  for (auto& [name, p] : dp.named_parameters()) p->grad.copy_(Tensor::zeros(p->grad.shape()));
  const std::vector<double> before =
      testing::host_values(dp.replica(1).named_parameters()[0].second->value);
  opt->step();
  EXPECT_EQ(testing::host_values(dp.replica(1).named_parameters()[0].second->value), before);
  expect_replicas_identical(dp);
}

TEST(DataParallel, WrongUseGetsClearErrors) {
  EXPECT_THROW(DataParallel(factory(1), {}), ValueError);
  DataParallel dp(factory(1), {Device::cpu(), Device::cpu()});
  EXPECT_THROW(dp.to(Device::cpu()), DeviceError);
  EXPECT_THROW(dp.replica(2), ValueError);
  EXPECT_THROW(dp.backward(Tensor::zeros(Shape({2, kSizes.back()}))), Error);  // no forward yet
  dp.forward(testing::random_tensor(Shape({4, kSizes.front()}), 1));
  EXPECT_THROW(dp.backward(Tensor::zeros(Shape({3, kSizes.back()}))), ShapeError);
  EXPECT_NE(dp.repr().find("DataParallel(replicas=2"), std::string::npos);
}

TEST(DataParallelCuda, TwoGpusMatchOneDevice) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count();
  DataParallel dp(factory(42), {Device::cuda(0), Device::cuda(1)});
  auto ref = mlp(42, Device::cuda(0), false);
  std::unique_ptr<Optimizer> dp_opt = dp.make_optimizer(adam());
  std::unique_ptr<Optimizer> ref_opt = make_optimizer(adam(), ref->named_parameters());
  uint32_t seed = 1;
  for (int64_t n : {10, 7, 1}) {
    const Tensor x = testing::random_tensor(Shape({n, kSizes.front()}), seed++, Device::cuda(0));
    const Tensor y = testing::random_tensor(Shape({n, kSizes.back()}), seed++, Device::cuda(0));
    step(dp, *dp_opt, x, y);
    step(*ref, *ref_opt, x, y);
  }
  expect_same_weights(dp, *ref, 1e-5, 1e-4);  // cuBLAS sums in another order than one GEMM
  expect_replicas_identical(dp);
}

// 2 and 3 GPUs against one CPU model. Weights loaded into replica 0 are then copied to the other
// replicas on this thread (as `--init` and `--resume` once did), with this thread's streams on
// those GPUs slowed down: the replicas must train from the copied weights, not from what their
// memory held before, so the copy and the replicas' own streams must be ordered.
TEST(DataParallelCuda, TwoAndThreeGpusTrainFromWeightsCopiedIntoTheReplicas) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count();
  for (int gpus = 2; gpus <= std::min(3, cuda_device_count()); ++gpus) {
    SCOPED_TRACE(std::to_string(gpus) + " GPUs");
    std::vector<Device> devices;
    for (int i = 0; i < gpus; ++i) devices.push_back(Device::cuda(i));
    DataParallel dp(factory(42), devices);
    auto ref = mlp(77, Device::cpu(), false);
    NamedParameters want = ref->named_parameters(), p0 = dp.named_parameters();
    for (std::size_t i = 0; i < p0.size(); ++i) p0[i].second->value.copy_(want[i].second->value);
    {
      testing::SlowCallerStreams slow(std::vector<Device>(devices.begin() + 1, devices.end()),
                                      20000);
      for (int r = 1; r < gpus; ++r) {
        NamedParameters pr = dp.replica(r).named_parameters();
        for (std::size_t i = 0; i < pr.size(); ++i) pr[i].second->value.copy_(p0[i].second->value);
      }
      std::unique_ptr<Optimizer> dp_opt = dp.make_optimizer(sgd_momentum());
      std::unique_ptr<Optimizer> ref_opt = make_optimizer(sgd_momentum(), ref->named_parameters());
      uint32_t seed = 1;
      for (int64_t n : {10, 7, 2}) {
        const Tensor x = testing::random_tensor(Shape({n, kSizes.front()}), seed++);
        const Tensor y = testing::random_tensor(Shape({n, kSizes.back()}), seed++);
        step(dp, *dp_opt, x.to(devices[0]), y.to(devices[0]));
        step(*ref, *ref_opt, x, y);
      }
    }
    expect_same_weights(dp, *ref, 1e-5, 1e-4);
    expect_replicas_identical(dp);
  }
}

// broadcast_replica0_parameters: what --init and --resume use now, in the replicas' own threads.
TEST(DataParallelCuda, BroadcastGivesEveryReplicaReplicaZerosWeights) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices, found " << cuda_device_count();
  DataParallel dp(factory(42), {Device::cuda(0), Device::cuda(1)});
  auto other = mlp(77, Device::cpu(), false);
  NamedParameters src = other->named_parameters(), dst = dp.named_parameters();
  for (std::size_t i = 0; i < dst.size(); ++i) dst[i].second->value.copy_(src[i].second->value);
  dp.broadcast_replica0_parameters();
  expect_replicas_identical(dp);
  expect_same_weights(dp.replica(1), *other, 0, 0);
}

}  // namespace
}  // namespace minitrain
