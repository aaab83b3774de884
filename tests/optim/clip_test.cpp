// clip_grad_norm_: the global 2-norm over all gradients, scaled by max_norm / (norm + 1e-6) when
// above max_norm (torch's clip_coef clamped to 1), untouched below it.

#include "optim/clip.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/allocator.h"
#include "core/option_error.h"
#include "kernels/cast.h"
#include "tests/core/io_test_util.h"
#include "tests/optim/optim_test_util.h"

namespace minitrain {
namespace {

using optim_test::ParamSet;

double reference_norm(const ParamSet& ps) {
  double sq = 0;
  for (const auto& g : ps.grads())
    for (double x : g) sq += x * x;
  return std::sqrt(sq);
}

TEST(ClipGradNorm, ReturnsTheTotalNormAndScalesAboveTheLimit) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    ParamSet ps(dtype);
    ps.set_grads(0);  // U(-1, 1) over 1008 elements: norm about 18
    const auto before = ps.grads();
    const double want = reference_norm(ps);
    const double got = clip_grad_norm_(ps.named(), 2.0);
    // The per-tensor squared norms are rounded to the gradient's type once (float32: 6e-8).
    EXPECT_NEAR(got, want, 1e-6 * want);
    const double coef = 2.0 / (want + 1e-6);
    for (std::size_t i = 0; i < ps.size(); ++i) {
      std::vector<double> scaled = before[i];
      for (double& x : scaled) x *= coef;
      EXPECT_ALLCLOSE(ps.grads()[i], scaled, 1e-7, 1e-6);
    }
    EXPECT_NEAR(reference_norm(ps), 2.0, 1e-5);
  }
}

TEST(ClipGradNorm, LeavesGradientsAloneAtOrBelowTheLimit) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  const auto before = ps.grads();
  const double norm = reference_norm(ps);
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 100.0), norm, 1e-6 * norm);
  EXPECT_EQ(ps.grads(), before);  // bit for bit: not even multiplied by 1
  clip_grad_norm_(ps.named(), norm * (1 + 1e-4));
  EXPECT_EQ(ps.grads(), before);
  // At exactly the limit torch's coefficient norm / (norm + 1e-6) is just below 1 and applies.
  clip_grad_norm_(ps.named(), norm);
  EXPECT_NE(ps.grads(), before);
  EXPECT_ALLCLOSE(ps.grads()[2], before[2], 0.0, 1e-6);
}

TEST(ClipGradNorm, SkipsUndefinedGradsAndRejectsBadMaxNorm) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[2].grad = Tensor();
  const double want = reference_norm(ps);  // the two defined ones
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 1e9), want, 1e-6 * want);
  for (double bad : {-1.0, std::nan(""), std::numeric_limits<double>::infinity()})
    EXPECT_NE(testing::error_message([&] { clip_grad_norm_(ps.named(), bad); }).find("max_norm"),
              std::string::npos)
        << bad;
  EXPECT_THROW(clip_grad_norm_(ps.named(), -1.0), OptionError);  // the command line names it
  ps[0].grad = Tensor(), ps[1].grad = Tensor();
  EXPECT_EQ(clip_grad_norm_(ps.named(), 1.0), 0.0);
}

// Issue 33: 0 means "off" in the library as on the command line (--clip-grad-norm 0), so the
// library's check is the setting's one check: the norm comes back, the gradients stay.
TEST(ClipGradNorm, ZeroMaxNormReturnsTheNormAndLeavesTheGradients) {
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  const auto before = ps.grads();
  const double want = reference_norm(ps);
  ASSERT_GT(want, 1.0);  // a max_norm of 0 would clip every gradient to zero in torch
  EXPECT_NEAR(clip_grad_norm_(ps.named(), 0.0), want, 1e-6 * want);
  EXPECT_EQ(ps.grads(), before);  // bit for bit
  EXPECT_EQ(clip_grad_norm_({}, 0.0), 0.0);
}

TEST(ClipGradNorm, NonFiniteNormIsReturnedAndSpreadLikeTorch) {
  // torch (error_if_nonfinite=False) multiplies by a NaN coefficient; the caller sees the norm.
  ParamSet ps(DType::Float32);
  ps.set_grads(0);
  ps[0].grad.copy_(Tensor::from_vector(std::vector<float>{std::nanf("")}, Shape{1}));
  EXPECT_TRUE(std::isnan(clip_grad_norm_(ps.named(), 1.0)));
  EXPECT_TRUE(std::isnan(ps.grads()[1][0]));
}

// foreach (issue 35: each device's norm in two launches and the scale in one) against the
// per-tensor path, bit for bit on each device: the returned norm and every gradient, for a
// model's shapes with odd and one-element tensors, float32, float64 and both in one list, an
// undefined gradient, max_norm hit, not hit and 0, and non-finite gradients (a NaN spreads, an
// inf makes the norm inf and the factor 0, as torch: the inf element becomes NaN, the rest 0).
class ClipGradNormForeach : public testing::DeviceTest {};

TEST_P(ClipGradNormForeach, IsThePerTensorPathBitForBit) {
  const std::vector<Shape> shapes = {Shape{16, 4}, Shape{16}, Shape{1},    Shape{16, 16}, Shape{16},
                                     Shape{1, 16}, Shape{1},  Shape{3001}, Shape{9000}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  struct Case {
    const char* name;
    std::vector<DType> dtypes;
    double max_norm;
    float poison;  // written into gradient 3's element 5 unless 0
    bool undefined;
  };
  const std::vector<Case> cases = {
      {"float32 hit", {DType::Float32}, 1.0, 0.f, false},
      {"float32 not hit", {DType::Float32}, 1e6, 0.f, false},
      {"float32 off", {DType::Float32}, 0.0, 0.f, false},
      {"float64 hit", {DType::Float64}, 1.0, 0.f, false},
      {"float64 not hit", {DType::Float64}, 1e6, 0.f, false},
      {"mixed hit, one undefined", {DType::Float32, DType::Float64}, 2.0, 0.f, true},
      {"nan spreads", {DType::Float32}, 1.0, nan, false},
      {"inf norm", {DType::Float32}, 1.0, inf, false},
      {"inf norm, float64", {DType::Float64}, 1.0, inf, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Parameter> a(shapes.size()), b(shapes.size());
    NamedParameters na, nb;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const DType dtype = c.dtypes[k % c.dtypes.size()];
      Tensor g = testing::random_tensor(shapes[k], 40u + uint32_t(k), Device::cpu(), dtype);
      if (k == 3 && c.poison != 0.f) {
        std::vector<double> v = testing::host_values(g);
        v[5] = c.poison;
        g = Tensor::from_vector(v, shapes[k]);
        if (dtype == DType::Float32) g = cast(g, DType::Float32);
      }
      if (!(c.undefined && k == 2)) {
        a[k].grad = g.to(device()).clone();  // to() of a CPU tensor to the CPU shares it
        b[k].grad = g.to(device()).clone();
      }
      na.emplace_back("p" + std::to_string(k), &a[k]);
      nb.emplace_back("p" + std::to_string(k), &b[k]);
    }
    const double per_tensor = clip_grad_norm_(na, c.max_norm, /*foreach=*/false);
    const double foreach = clip_grad_norm_(nb, c.max_norm, /*foreach=*/true);
    uint64_t got_bits, want_bits;
    std::memcpy(&got_bits, &foreach, sizeof got_bits);
    std::memcpy(&want_bits, &per_tensor, sizeof want_bits);
    EXPECT_EQ(got_bits, want_bits) << foreach << " vs " << per_tensor;
    if (c.poison == inf) {
      EXPECT_EQ(foreach, std::numeric_limits<double>::infinity());
    }
    if (c.poison != c.poison) {
      EXPECT_TRUE(std::isnan(foreach));
    }
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      if (!a[k].grad.defined()) continue;
      EXPECT_EQ(testing::tensor_bytes(b[k].grad.to(Device::cpu())),
                testing::tensor_bytes(a[k].grad.to(Device::cpu())))
          << "gradient " << k;
    }
    if (c.poison == inf) {  // torch: clip_coef = 1 / (inf + 1e-6) = 0; inf * 0 = NaN
      const std::vector<double> g3 = testing::host_values(b[3].grad);
      EXPECT_TRUE(std::isnan(g3[5]));
      EXPECT_EQ(g3[4], 0.0);
    }
  }
}

// torch 2's own answers (torch.nn.utils.clip_grad_norm_([a, b], 1.0) on float32 CPU tensors,
// printed by hand): the scaled values, and the non-finite cases of torch's
// error_if_nonfinite=False.
TEST_P(ClipGradNormForeach, GivesTorchsAnswers) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto run = [&](std::vector<float> a, std::vector<float> b, double max_norm, double& norm) {
    Parameter pa, pb;
    pa.grad = Tensor::from_vector(a, Shape{int64_t(a.size())}).to(device());
    pb.grad = Tensor::from_vector(b, Shape{int64_t(b.size())}).to(device());
    norm = clip_grad_norm_({{"a", &pa}, {"b", &pb}}, max_norm);
    std::vector<double> out = testing::host_values(pa.grad);
    for (double v : testing::host_values(pb.grad)) out.push_back(v);
    return out;
  };
  double norm = 0;
  // [3, 4]: norm 5; max_norm 1 -> [0.5999999046325684, 0.7999998331069946]
  EXPECT_EQ(run({3.f, 4.f}, {}, 1.0, norm),
            (std::vector<double>{0.5999999046325684, 0.7999998331069946}));
  EXPECT_EQ(norm, 5.0);
  EXPECT_EQ(run({3.f, 4.f}, {}, 5.0 + 1e-5, norm), (std::vector<double>{3.0, 4.0}));
  // [0.5, -1, inf, 2], [3]: norm inf, factor 0: [0, -0, nan, 0], [0]
  std::vector<double> g = run({0.5f, -1.f, inf, 2.f}, {3.f}, 1.0, norm);
  EXPECT_EQ(norm, std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(g[2]));
  EXPECT_EQ(g[0], 0.0);
  EXPECT_TRUE(std::signbit(g[1]));
  EXPECT_EQ(g[4], 0.0);
  // 1e20: its square overflows float32 (torch sums float32 gradients in float32): norm inf, zeros
  g = run({0.5f, -1.f, 1e20f, 2.f}, {3.f}, 1.0, norm);
  EXPECT_EQ(norm, std::numeric_limits<double>::infinity());
  for (double v : g) EXPECT_EQ(v, 0.0);
  // nan: norm nan, every gradient nan
  g = run({0.5f, -1.f, nan, 2.f}, {3.f}, 1.0, norm);
  EXPECT_TRUE(std::isnan(norm));
  for (double v : g) EXPECT_TRUE(std::isnan(v));
}

// Note [buffers that live across steps] for clipping (issue 35): with a ClipWorkspace the sum of
// squares and the norm's partials come from slots the caller keeps. A PendingGradNorm a caller
// still holds is never rewritten by a later call, every call gives the bits of a call without a
// workspace, and calls whose caller lets go of the last result ask the allocator for nothing
// after the first.
TEST_P(ClipGradNormForeach, AWorkspaceKeepsWhatACallerHoldsAndAllocatesNothingOnceWarm) {
  const std::vector<Shape> shapes = {Shape{16, 4}, Shape{16}, Shape{3001}, Shape{1}};
  // Two identical parameter lists from `seed`: one clipped with the workspace, one without.
  struct Grads {
    std::vector<Parameter> params;
    NamedParameters named;
  };
  auto make = [&](uint32_t seed, Grads& g) {
    g.params.assign(shapes.size(), Parameter());
    g.named.clear();
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      g.params[k].grad = testing::random_tensor(shapes[k], seed + uint32_t(k), device());
      g.named.emplace_back("p" + std::to_string(k), &g.params[k]);
    }
  };
  ClipWorkspace ws;
  Grads a, a_ref, b, b_ref;
  make(10, a);
  make(10, a_ref);
  make(20, b);
  make(20, b_ref);
  const PendingGradNorm kept_a = clip_grad_norm_deferred_(a.named, 1.0, true, &ws);
  const PendingGradNorm kept_b = clip_grad_norm_deferred_(b.named, 1.0, true, &ws);
  ASSERT_EQ(kept_a.sum_sq.size(), 1u);
  ASSERT_EQ(kept_b.sum_sq.size(), 1u);
  EXPECT_NE(kept_a.sum_sq[0].raw_data(), kept_b.sum_sq[0].raw_data())
      << "a held sum of squares was handed out again";
  const double want_a = clip_grad_norm_(a_ref.named, 1.0),
               want_b = clip_grad_norm_(b_ref.named, 1.0);
  EXPECT_GT(want_a, 1.0);  // scaled: the factor read from the kept sum matters
  EXPECT_NE(want_a, want_b);
  EXPECT_EQ(kept_a.read(), want_a);  // a's sum was not rewritten by b's call
  EXPECT_EQ(kept_b.read(), want_b);
  for (std::size_t k = 0; k < shapes.size(); ++k) {
    EXPECT_EQ(testing::tensor_bytes(a.params[k].grad.to(Device::cpu())),
              testing::tensor_bytes(a_ref.params[k].grad.to(Device::cpu())))
        << "gradient " << k;
    EXPECT_EQ(testing::tensor_bytes(b.params[k].grad.to(Device::cpu())),
              testing::tensor_bytes(b_ref.params[k].grad.to(Device::cpu())))
        << "gradient " << k;
  }
  EXPECT_EQ(ws.devices(), 1u);

  // A caller that keeps nothing (the Trainer drops each step's norm): nothing after the first.
  Grads c;
  make(30, c);
  int64_t before = 0;
  double norm = 0;
  for (int call = 0; call < 4; ++call) {
    if (call == 1) before = static_cast<int64_t>(memory_stats(device()).allocations);
    const PendingGradNorm p = clip_grad_norm_deferred_(c.named, 1e6, true, &ws);  // not hit
    if (call == 0) norm = p.read();  // the host read allocates on the CPU: not counted below
  }
  EXPECT_EQ(static_cast<int64_t>(memory_stats(device()).allocations), before);
  EXPECT_EQ(clip_grad_norm_deferred_(c.named, 1e6, true, &ws).read(), norm);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(ClipGradNormForeach);

// Gradients on two GPUs (model parallelism): each device's sum as one list, read by the host,
// scaled by the host's factor; the per-tensor path's bits, hit or not.
TEST(CudaClipGradNormForeach, TwoDevicesGiveThePerTensorPathsBits) {
  MT_SKIP_UNLESS_CUDA_DEVICES(2);
  const std::vector<Shape> shapes = {Shape{16, 4}, Shape{16}, Shape{1, 16}, Shape{1}};
  for (double max_norm : {0.5, 1e6}) {
    std::vector<Parameter> a(shapes.size()), b(shapes.size());
    NamedParameters na, nb;
    for (std::size_t k = 0; k < shapes.size(); ++k) {
      const Device d = Device::cuda(k < 2 ? 0 : 1);
      const Tensor g = testing::random_tensor(shapes[k], 70u + uint32_t(k), d);
      a[k].grad = g.clone();
      b[k].grad = g.clone();
      na.emplace_back("p" + std::to_string(k), &a[k]);
      nb.emplace_back("p" + std::to_string(k), &b[k]);
    }
    EXPECT_EQ(clip_grad_norm_(nb, max_norm, true), clip_grad_norm_(na, max_norm, false));
    for (std::size_t k = 0; k < shapes.size(); ++k)
      EXPECT_EQ(testing::tensor_bytes(b[k].grad), testing::tensor_bytes(a[k].grad))
          << "max_norm " << max_norm << ", gradient " << k;
  }
}

}  // namespace
}  // namespace minitrain
