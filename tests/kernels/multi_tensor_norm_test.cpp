// Multi-tensor clipping (kernels/multi_tensor_norm.h) against the per-tensor path it replaces, bit
// for bit: the total sum of squares (squared_norm per tensor in its own type, widened, added in
// list order) and the scale (clip_scale_ per tensor), on odd sizes, one-element and empty tensors,
// misaligned views, tensors over several pass-1 blocks and CPU chunks, more tensors than one
// launch holds, float32, float64 and both in one list, non-finite values; the CPU twin against
// the emulated GPU; and the launches it takes.

#include "kernels/multi_tensor_norm.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/multi_tensor_apply.h"
#include "kernels/reduce.h"
#include "tests/support/test_util.h"

#if MINITRAIN_CUDA_EMULATED
#include "cuda_emu/api_counts.h"
#endif

namespace minitrain {
namespace {

using testing::error_message;
using ::testing::HasSubstr;
using testing::host_values;
using testing::random_tensor;

// Odd sizes around the pass-1 block (kBlock * 8 = 2048 elements), the CPU chunk (8192) and the
// 16-byte packs, one-element and empty tensors among them.
std::vector<int64_t> odd_sizes() {
  std::vector<int64_t> s = {1, 3, 0, 17, 1, 1023, 2047, 2049, 5, 8193, 4099, 1, 20001, 2};
  if (testing::over_size_cap(20001)) s = {1, 3, 0, 17, 1, 1023, 2047, 2049, 5, 4099, 1, 2};
  return s;
}

// A list; odd positions are views one element into their storage (misaligned: pass 1 reads them
// without packs). dtypes[k % dtypes.size()] is tensor k's type.
std::vector<Tensor> make_list(const std::vector<int64_t>& sizes, uint32_t seed, Device d,
                              const std::vector<DType>& dtypes, double lo = -1.0, double hi = 1.0) {
  std::vector<Tensor> out;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    const int64_t offset = k % 2;
    out.push_back(
        random_tensor({sizes[k] + offset}, seed + uint32_t(k), d, dtypes[k % dtypes.size()], lo, hi)
            .narrow(offset, sizes[k]));
  }
  return out;
}

std::vector<Tensor> clones(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(t.clone());
  return out;
}

// The per-tensor path of clip_grad_norm_ (optim/clip.cpp, foreach = false), op by op.
Tensor per_tensor_sum_of_squares(const std::vector<Tensor>& xs, Device d) {
  Tensor total = Tensor::zeros(Shape{}, DType::Float64, d);
  for (std::size_t k = 0; k < xs.size(); ++k) {
    Tensor sq = squared_norm(xs[k]);
    if (sq.dtype() != DType::Float64) sq = cast(sq, DType::Float64);
    if (k == 0) {
      total = sq;
    } else {
      add(total, total, sq);
    }
  }
  return total;
}

uint64_t bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

Tensor scalar(double v, Device d) {
  return Tensor::from_vector(std::vector<double>{v}, Shape{}).to(d);
}

double multi_total(const std::vector<Tensor>& xs, Device d) {
  Tensor total = Tensor::empty(Shape{}, DType::Float64, d);
  squared_norm_multi(total, xs);
  return total.item();
}

class MultiTensorNorm : public testing::DeviceTest {};

TEST_P(MultiTensorNorm, SumOfSquaresIsThePerTensorPathsBitForBit) {
  const std::vector<std::vector<DType>> types = {
      {DType::Float32}, {DType::Float64}, {DType::Float32, DType::Float64, DType::Float64}};
  for (const auto& dtypes : types) {
    for (uint32_t seed : {1u, 7u}) {
      SCOPED_TRACE("dtypes " + std::to_string(dtypes.size()) + " seed " + std::to_string(seed));
      const std::vector<Tensor> xs = make_list(odd_sizes(), seed, device(), dtypes, -3.0, 3.0);
      const double want = per_tensor_sum_of_squares(xs, device()).item();
      const double got = multi_total(xs, device());
      ASSERT_GT(got, 1.0);  // not silently zero
      EXPECT_EQ(bits(got), bits(want)) << got << " vs " << want;
    }
  }
}

TEST_P(MultiTensorNorm, ManyTensorsAcrossSeveralLaunchesFoldInListOrder) {
  // 250 tensors: three launches of each kernel on a GPU (kNormMaxTensors = 100), the running total
  // carried from one fold launch to the next.
  std::vector<int64_t> sizes;
  for (int k = 0; k < 250; ++k) sizes.push_back(1 + (k * 37) % 301);
  // (The racecheck stage, which caps sizes, checks float32 only: it runs the same kernels.)
  const bool capped = testing::over_size_cap(20001);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    if (capped && dtype == DType::Float64) continue;
    const std::vector<Tensor> xs = make_list(sizes, 3, device(), {dtype});
    EXPECT_EQ(bits(multi_total(xs, device())), bits(per_tensor_sum_of_squares(xs, device()).item()))
        << dtype;
  }
}

TEST_P(MultiTensorNorm, EmptyListsAndEmptyTensorsGiveZero) {
  EXPECT_EQ(multi_total({}, device()), 0.0);
  const std::vector<Tensor> empties = {Tensor::empty(Shape{0}, DType::Float32, device()),
                                       Tensor::empty(Shape{0}, DType::Float64, device())};
  EXPECT_EQ(bits(multi_total(empties, device())), bits(0.0));
}

TEST_P(MultiTensorNorm, NonFiniteValuesGiveThePerTensorPathsTotal) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Case {
    const char* name;
    float value;
    bool is_nan;
  };
  // 1e20 squared is 1e40: finite in double, inf once rounded to float32 as squared_norm returns
  // it (torch, which sums float32 gradients in float32, gets inf too).
  for (const Case& c : {Case{"nan", nan, true}, Case{"inf", inf, false},
                        Case{"float32 overflow of the square", 1e20f, false}}) {
    SCOPED_TRACE(c.name);
    std::vector<Tensor> xs = make_list({5, 3000, 1}, 11, device(), {DType::Float32});
    std::vector<float> v = testing::random_floats(3000, 5);
    v[1234] = c.value;
    xs[1] = Tensor::from_vector(v, Shape{3000}).to(device());
    const double got = multi_total(xs, device());
    const double want = per_tensor_sum_of_squares(xs, device()).item();
    if (c.is_nan) {
      EXPECT_TRUE(std::isnan(got));
      EXPECT_TRUE(std::isnan(want));
    } else {
      EXPECT_EQ(got, std::numeric_limits<double>::infinity());
      EXPECT_EQ(bits(got), bits(want));
    }
  }
}

TEST_P(MultiTensorNorm, ScaleIsThePerTensorScaleBitForBitHitOrNot) {
  // More tensors than one scale launch holds (110), a tensor over several chunks
  // (kMultiTensorChunk), both types.
  std::vector<int64_t> sizes = odd_sizes();
  sizes.push_back(testing::over_size_cap(2 * kMultiTensorChunk + 5) ? 4099
                                                                    : 2 * kMultiTensorChunk + 5);
  for (int k = 0; k < 120; ++k) sizes.push_back(1 + k % 7);
  // The racecheck stage (sizes capped) runs two of the cases below: the same kernels.
  const bool capped = testing::over_size_cap(20001);
  const std::vector<Tensor> xs =
      make_list(sizes, 21, device(), {DType::Float32, DType::Float64}, -2.0, 2.0);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Case {
    const char* name;
    double sum_sq, max_norm;
  };
  for (const Case& c : {Case{"hit", 400.0, 1.0}, Case{"not hit", 400.0, 100.0},
                        Case{"just under the limit (coef < 1 at norm == max_norm)", 400.0, 20.0},
                        Case{"nan spreads", nan, 1.0}, Case{"inf norm zeroes", inf, 1.0}}) {
    SCOPED_TRACE(c.name);
    if (capped && c.max_norm != 1.0) continue;
    if (capped && std::isinf(c.sum_sq)) continue;
    const Tensor sum_sq = scalar(c.sum_sq, device());
    std::vector<Tensor> got = clones(xs), want = clones(xs);
    clip_scale_multi_(got, sum_sq, c.max_norm);
    for (Tensor& w : want) clip_scale_(w, sum_sq, c.max_norm);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      // host_values widens to double exactly: equal vectors (NaN aside) are equal bits.
      const std::vector<double> g = host_values(got[k]), w = host_values(want[k]);
      ASSERT_EQ(g.size(), w.size());
      for (std::size_t i = 0; i < g.size(); ++i)
        ASSERT_EQ(bits(g[i]), bits(w[i])) << "tensor " << k << " element " << i;
    }
    const bool untouched = c.max_norm == 100.0;
    EXPECT_EQ(host_values(got[0]) == host_values(xs[0]), untouched);
  }
}

TEST_P(MultiTensorNorm, RejectsMixedDevicesAndSixteenBitTypes) {
  Tensor total = Tensor::empty(Shape{}, DType::Float64, device());
  const std::vector<Tensor> half = {Tensor::zeros(Shape{3}, DType::Float32, device()),
                                    Tensor::zeros(Shape{3}, DType::Float16, device())};
  EXPECT_THROW(squared_norm_multi(total, half), DTypeError);
  Tensor f32_total = Tensor::empty(Shape{}, DType::Float32, device());
  EXPECT_THAT(error_message([&] { squared_norm_multi(f32_total, {}); }),
              HasSubstr("total must be float64"));
  if (device().is_cuda()) {
    std::vector<Tensor> mixed = {Tensor::zeros(Shape{3}, DType::Float32, device()),
                                 Tensor::zeros(Shape{3}, DType::Float32, Device::cpu())};
    EXPECT_THAT(error_message([&] { squared_norm_multi(total, mixed); }), HasSubstr("xs[1]"));
    EXPECT_THROW(clip_scale_multi_(mixed, total, 1.0), DeviceError);
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(MultiTensorNorm);

// The CPU twin against the GPU: the totals differ only in the order of the double sums inside each
// tensor (chunks of 8192 against per-thread slices and a shuffle tree) before the rounding to the
// tensor's type, so float32 totals agree to float32 rounding and float64 ones closely; the scale
// of the same sum of squares is the same bits.
TEST(CudaMultiTensorNorm, CpuTwinAgreesWithTheGpu) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  for (DType dtype : {DType::Float32, DType::Float64}) {
    SCOPED_TRACE(dtype);
    const std::vector<Tensor> cpu = make_list(odd_sizes(), 9, Device::cpu(), {dtype});
    std::vector<Tensor> gpu;
    for (const Tensor& t : cpu) gpu.push_back(t.to(Device::cuda(0)));
    const double want = multi_total(cpu, Device::cpu());
    const double got = multi_total(gpu, Device::cuda(0));
    EXPECT_NEAR(got, want, (dtype == DType::Float32 ? 1e-6 : 1e-13) * want);
    Tensor sum_sq = scalar(got, Device::cpu());
    Tensor gpu_sum_sq = sum_sq.to(Device::cuda(0));
    std::vector<Tensor> cpu_scaled = clones(cpu);
    clip_scale_multi_(cpu_scaled, sum_sq, 1.0);
    clip_scale_multi_(gpu, gpu_sum_sq, 1.0);
    for (std::size_t k = 0; k < cpu.size(); ++k)
      EXPECT_EQ(host_values(gpu[k]), host_values(cpu_scaled[k])) << "tensor " << k;
  }
}

// What the list costs on a GPU: two launches for the norm of up to kNormMaxTensors tensors (pass 1
// and the fold), one for the scale; 250 tensors: three of each for the norm; one allocation (the
// partials) and nothing read by the host.
TEST(CudaMultiTensorNorm, LaunchesPerList) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
#if MINITRAIN_CUDA_EMULATED
  const Device d = Device::cuda(0);
  const std::vector<Tensor> six = make_list({64, 16, 256, 16, 16, 1}, 2, d, {DType::Float32});
  std::vector<int64_t> sizes(250, 3);
  const std::vector<Tensor> many = make_list(sizes, 2, d, {DType::Float32});
  Tensor total = Tensor::empty(Shape{}, DType::Float64, d);
  auto launches = [](auto&& f) {
    const mtemu::ApiCounts before = mtemu::api_counts_of_this_thread();
    f();
    const mtemu::ApiCounts after = mtemu::api_counts_of_this_thread();
    EXPECT_EQ(after.device_to_host_copies, before.device_to_host_copies);
    EXPECT_EQ(after.host_syncs, before.host_syncs);
    return after.launches - before.launches;
  };
  EXPECT_EQ(launches([&] { squared_norm_multi(total, six); }), 2);
  EXPECT_EQ(launches([&] { squared_norm_multi(total, many); }), 6);
  std::vector<Tensor> scaled = clones(six);
  EXPECT_EQ(launches([&] { clip_scale_multi_(scaled, total, 1.0); }), 1);
  EXPECT_EQ(launches([&] { squared_norm_multi(total, {}); }), 1);
#else
  GTEST_SKIP() << "launches are counted on the emulated GPUs";
#endif
}

}  // namespace
}  // namespace minitrain
