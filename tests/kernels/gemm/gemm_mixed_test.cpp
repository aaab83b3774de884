// Mixed precision's GEMM (gemm_mixed_with, issue 35): 16-bit A, B and C fed to the GEMM as they
// are. The built-in kernels (reference on the CPU, warptile on a GPU) must give the bits of the
// cast path they replace (widen each 16-bit operand, the same backend's float32 GEMM, bias_add,
// a cast to C's dtype) on odd shapes, every transpose and every dtype combination; cuBLAS and
// cuBLASLt (real GPUs only) the same values on small integers, where every sum is exact.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/bias_add.h"
#include "kernels/cast.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/reduce.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::error_message;
using testing::host_values;

struct Problem {
  int64_t m, k, n;
};

// Tails in every dimension, k = 1, and sizes past one warptile block (128) in m, n and k.
const Problem kShapes[] = {{1, 1, 1}, {17, 33, 65}, {5, 300, 7}, {129, 31, 130}};

Shape stored(int64_t rows, int64_t cols, bool trans) {
  return trans ? Shape{cols, rows} : Shape{rows, cols};
}

// Random values held in `dtype` (16-bit values when it is 16-bit).
Tensor values(const Shape& s, uint32_t seed, DType dtype, Device device) {
  const Tensor t = testing::random_tensor(s, seed, Device::cpu(), DType::Float32);
  return cast(t, dtype).to(device);
}

// The cast path: widen, the backend's float32 GEMM, bias_add, then C rounded to its dtype.
void cast_path(const std::string& backend, Tensor& c, const Tensor& a, bool ta, const Tensor& b,
               bool tb, double alpha, double beta, const Tensor& bias) {
  Tensor c32 = cast(c, DType::Float32);
  gemm_with(backend, c32, cast(a, DType::Float32), ta, cast(b, DType::Float32), tb, alpha, beta);
  if (bias.defined()) bias_add(c32, c32, bias);
  cast(c, c32);
}

// Every combination of float32 and `p` for (c, a, b), not all float32.
std::vector<std::vector<DType>> combinations(DType p) {
  std::vector<std::vector<DType>> out;
  for (int mask = 1; mask < 8; ++mask)
    out.push_back({mask & 1 ? p : DType::Float32, mask & 2 ? p : DType::Float32,
                   mask & 4 ? p : DType::Float32});
  return out;
}

// every_transpose: all four (trans_a, trans_b) for each case; otherwise one each, in turn (the
// emulated GPU runs a block on CPU threads: a quarter of the time, every pair still covered).
void expect_cast_path_bits(const std::string& backend, Device device, bool every_transpose) {
  int checked = 0, turn = 0;
  for (DType p : {DType::BFloat16, DType::Float16})
    for (const std::vector<DType>& t : combinations(p))
      for (const Problem& s : kShapes)
        for (bool ta : {false, true})
          for (bool tb : {false, true}) {
            const int pair = int(ta) * 2 + int(tb), case_index = turn++ / 4;
            if (!every_transpose && pair != (case_index + case_index / 4) % 4) continue;
            // The racecheck stage caps sizes: a larger one runs the same code on more blocks.
            if (testing::over_size_cap(std::max({s.m * s.k, s.k * s.n, s.m * s.n}))) continue;
            const bool with_bias = (s.m + ta + tb) % 2 == 1;
            const double alpha = tb ? 0.5 : 1.0, beta = ta ? 0.25 : 0.0;
            const uint32_t seed = uint32_t(s.m * 7 + s.k * 3 + s.n + 2 * ta + tb);
            const Tensor a = values(stored(s.m, s.k, ta), seed, t[1], device);
            const Tensor b = values(stored(s.k, s.n, tb), seed + 1, t[2], device);
            const Tensor bias =
                with_bias ? values(Shape{s.n}, seed + 2, DType::Float32, device) : Tensor();
            const Tensor c0 = values(Shape{s.m, s.n}, seed + 3, t[0], device);
            Tensor got = cast(c0, t[0]), want = cast(c0, t[0]);
            gemm_mixed_with(backend, got, a, ta, b, tb, alpha, beta, bias);
            cast_path(backend, want, a, ta, b, tb, alpha, beta, bias);
            ASSERT_GT(testing::host_max_abs(got), 0.0);  // not silently zero
            ASSERT_EQ(host_values(got), host_values(want))
                << backend << ": c " << t[0] << " a " << t[1] << " b " << t[2] << ", m " << s.m
                << " k " << s.k << " n " << s.n << ", ta " << ta << " tb " << tb << ", bias "
                << with_bias << ", alpha " << alpha << " beta " << beta;
            ++checked;
          }
  EXPECT_GT(checked, 0);
}

TEST(GemmMixed, ReferenceGivesTheCastPathsBitsOnOddShapes) {
  expect_cast_path_bits("reference", Device::cpu(), /*every_transpose=*/true);
}

TEST(GemmMixedCuda, WarptileGivesTheCastPathsBitsOnOddShapes) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  expect_cast_path_bits("warptile", Device::cuda(0), /*every_transpose=*/false);
}

// cuBLAS and cuBLASLt sum in their own order: on small integers every partial sum is exact, so
// they must give the cast path's values exactly (A and B of one 16-bit type, C that type or
// float32, their type tables; a bias through cuBLASLt's epilogue).
TEST(GemmMixedCuda, CublasAndCublasLtGiveTheCastPathsValuesOnIntegers) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  if (cuda_emulated()) GTEST_SKIP() << "needs cuBLAS on a real GPU (the emulated GPUs have none)";
  const Device gpu = Device::cuda(0);
  auto integers = [&](const Shape& s, uint32_t seed, DType dtype) {
    std::vector<float> v(static_cast<std::size_t>(s.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(int((i * 7 + seed) % 5) - 2);
    return cast(Tensor::from_vector(v, s), dtype).to(gpu);
  };
  for (const std::string backend : {"cublas", "cublaslt"})
    for (DType p : {DType::BFloat16, DType::Float16})
      for (DType c_dtype : {p, DType::Float32})
        for (const Problem& s : kShapes)
          for (bool ta : {false, true})
            for (bool tb : {false, true})
              for (bool with_bias : {false, true}) {
                if (with_bias && backend == "cublas") continue;  // no bias epilogue
                ASSERT_TRUE(gemm_takes_mixed(backend, gpu, c_dtype, p, p, with_bias));
                const Tensor a = integers(stored(s.m, s.k, ta), 1, p);
                const Tensor b = integers(stored(s.k, s.n, tb), 2, p);
                const Tensor bias = with_bias ? integers(Shape{s.n}, 3, DType::Float32) : Tensor();
                Tensor got = Tensor::zeros(Shape{s.m, s.n}, c_dtype, gpu);
                Tensor want = Tensor::zeros(Shape{s.m, s.n}, c_dtype, gpu);
                gemm_mixed_with(backend, got, a, ta, b, tb, 1.0, 0.0, bias);
                cast_path("cublas", want, a, ta, b, tb, 1.0, 0.0, bias);
                EXPECT_EQ(host_values(got), host_values(want))
                    << backend << " c " << c_dtype << " p " << p << " m " << s.m << " k " << s.k
                    << " n " << s.n << " ta " << ta << " tb " << tb << " bias " << with_bias;
              }
}

TEST(GemmMixed, WhichBackendsHaveIt) {
  const Device cpu = Device::cpu();
  const DType f32 = DType::Float32, bf16 = DType::BFloat16, f16 = DType::Float16;
  EXPECT_TRUE(gemm_takes_mixed("reference", cpu, bf16, bf16, f32, true));
  EXPECT_TRUE(gemm_takes_mixed("reference", cpu, f32, f16, bf16, false));
  EXPECT_FALSE(gemm_takes_mixed("reference", cpu, f32, f32, f32, false));  // not mixed
  EXPECT_FALSE(gemm_takes_mixed("openblas", cpu, f16, f16, f16, false));   // the cast path
  EXPECT_FALSE(gemm_takes_mixed("auto", cpu, f16, f16, f16, false));       // = openblas
#if MINITRAIN_WITH_CUDA
  EXPECT_FALSE(gemm_takes_mixed("warptile", cpu, f16, f16, f16, false));  // another device type
  EXPECT_TRUE(gemm_takes_mixed("warptile", Device::cuda(0), f16, f16, f32, true));
  EXPECT_FALSE(gemm_takes_mixed("naive", Device::cuda(0), f16, f16, f32, false));
#endif
#if MINITRAIN_WITH_CUDA_LIBS
  EXPECT_TRUE(gemm_takes_mixed("cublas", Device::cuda(0), f16, f16, f16, false));
  EXPECT_TRUE(gemm_takes_mixed("cublas", Device::cuda(0), f32, bf16, bf16, false));
  EXPECT_FALSE(gemm_takes_mixed("cublas", Device::cuda(0), f16, f16, f32, false));  // B differs
  EXPECT_FALSE(gemm_takes_mixed("cublas", Device::cuda(0), f16, f16, f16, true));   // no bias
  EXPECT_TRUE(gemm_takes_mixed("cublaslt", Device::cuda(0), bf16, bf16, bf16, true));
#endif
}

TEST(GemmMixed, RefusesWhatItCannotTakeNamingIt) {
  const Device cpu = Device::cpu();
  Tensor c = Tensor::zeros(Shape{2, 3}, DType::Float16, cpu);
  const Tensor a = Tensor::zeros(Shape{2, 4}, DType::Float16, cpu);
  const Tensor b = Tensor::zeros(Shape{4, 3}, DType::Float32, cpu);
  EXPECT_THROW(gemm_mixed_with("openblas", c, a, false, b, false), ValueError);
  EXPECT_NE(error_message([&] {
              gemm_mixed_with("openblas", c, a, false, b, false);
            }).find("backends that have: reference"),
            std::string::npos);
  const Tensor a64 = Tensor::zeros(Shape{2, 4}, DType::Float64, cpu);
  EXPECT_THROW(gemm_mixed_with("reference", c, a64, false, b, false), DTypeError);
  EXPECT_THROW(gemm_mixed_with("reference", c, a, true, b, false), ShapeError);
  const Tensor short_bias = Tensor::zeros(Shape{2}, DType::Float32, cpu);
  EXPECT_NE(error_message([&] {
              gemm_mixed_with("reference", c, a, false, b, false, 1.0, 0.0, short_bias);
            }).find("bias is [2] but c has 3 columns"),
            std::string::npos);
  const Tensor bias16 = Tensor::zeros(Shape{3}, DType::Float16, cpu);
  EXPECT_THROW(gemm_mixed_with("reference", c, a, false, b, false, 1.0, 0.0, bias16), DTypeError);
}

// Mixed precision's bias gradient: sum_rows of a 16-bit matrix into float32 reads it widened, the
// bits of summing its float32 copy, on the CPU and on a GPU.
void expect_sum_rows_of_widened_bits(Device device) {
  for (DType p : {DType::BFloat16, DType::Float16})
    for (const Shape& s : {Shape{1, 1}, Shape{37, 3}, Shape{100, 65}}) {
      const Tensor x = values(s, uint32_t(s[0] + s[1]), p, device);
      Tensor got = Tensor::zeros(Shape{s[1]}, DType::Float32, device);
      Tensor want = Tensor::zeros(Shape{s[1]}, DType::Float32, device);
      sum_rows(got, x);
      sum_rows(want, cast(x, DType::Float32));
      ASSERT_GT(testing::host_max_abs(got), 0.0);
      EXPECT_EQ(host_values(got), host_values(want)) << p << " " << s;
    }
}

TEST(SumRowsMixed, SixteenBitRowsGiveTheWidenedRowsBits) {
  expect_sum_rows_of_widened_bits(Device::cpu());
}

// Both of sum_rows' branches (same dtype; 16-bit into float32) refuse a wrong out alike.
TEST(SumRowsMixed, AnOutOfTheWrongSizeIsNamedInEitherBranch) {
  const Device cpu = Device::cpu();
  for (DType p : {DType::Float32, DType::Float16}) {
    const Tensor x = Tensor::zeros(Shape{5, 3}, p, cpu);
    Tensor out = Tensor::zeros(Shape{4}, DType::Float32, cpu);
    EXPECT_THROW(sum_rows(out, x), ShapeError) << p;
    EXPECT_NE(error_message([&] {
                sum_rows(out, x);
              }).find("sum_rows: out has 4 entries but x has 3 columns (out [4], x [5, 3])"),
              std::string::npos)
        << p;
    Tensor flat = Tensor::zeros(Shape{1, 3}, DType::Float32, cpu);
    EXPECT_THROW(sum_rows(flat, x), ShapeError) << p;
  }
}

TEST(SumRowsMixedCuda, SixteenBitRowsGiveTheWidenedRowsBits) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  expect_sum_rows_of_widened_bits(Device::cuda(0));
}

}  // namespace
}  // namespace minitrain
