// The hand-written CUDA GEMM ladder (kernels/gemm/gemm_ladder/) against cuBLAS. Inputs are small
// integers in [-3, 3]: every product and partial sum is an integer below 2^24, exact in FP32, and
// the inputs are exact in TF32 and BF16 too, so every variant (tensor cores included) must match
// cuBLAS bit for bit; any wrong index, transpose, tail or alpha/beta handling shows as a mismatch.
// The cuBLAS result is first asserted non-zero, so that two silently empty results cannot agree.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_rungs.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

// The ladder in order, read from its one table (gemm_ladder_rungs.h). Test instances are named
// after it, so they exist in every build; a CPU-only build (which compiles no ladder) and a
// machine without a GPU report them skipped.
const std::vector<std::string> kLadder(std::begin(gemm_ladder::kRungNames),
                                       std::end(gemm_ladder::kRungNames));

#if MINITRAIN_WITH_CUDA
constexpr bool kLadderBuilt = true;
GemmBackend find_backend(const std::string& name) {
  for (GemmBackend& b : cuda_gemm_ladder_backends())
    if (b.name == name) return b;
  ADD_FAILURE() << "no ladder backend named " << name;
  return {};
}
#else
constexpr bool kLadderBuilt = false;
GemmBackend find_backend(const std::string&) { return {}; }
#endif

#define SKIP_UNLESS_LADDER_BUILT() \
  if (!kLadderBuilt) GTEST_SKIP() << "CPU-only build: the CUDA GEMM ladder is not compiled"

TEST(GemmLadderRegistry, ListsEveryTechniqueInOrder) {
  SKIP_UNLESS_LADDER_BUILT();
#if MINITRAIN_WITH_CUDA
  const std::vector<GemmBackend> ladder = cuda_gemm_ladder_backends();
  ASSERT_EQ(ladder.size(), kLadder.size());
  for (size_t i = 0; i < ladder.size(); ++i) {
    SCOPED_TRACE(ladder[i].name);
    EXPECT_EQ(ladder[i].name, kLadder[i]);
    EXPECT_EQ(ladder[i].device, DeviceType::CUDA);
    EXPECT_FALSE(ladder[i].technique.empty());
    EXPECT_TRUE(static_cast<bool>(ladder[i].float32));
    EXPECT_FALSE(static_cast<bool>(ladder[i].float64)) << "the ladder is float32 only";
    EXPECT_EQ(ladder[i].reduced_precision_inputs, ladder[i].name.rfind("tc_", 0) == 0);
  }
#endif
}

TEST(GemmLadderRegistry, RejectsCpuPointersAndNegativeSizesBeforeLaunching) {
  SKIP_UNLESS_LADDER_BUILT();
  float a = 1, b = 1, c = 0;
  for (const std::string& name : kLadder) {
    const GemmBackend backend = find_backend(name);
    ASSERT_TRUE(static_cast<bool>(backend.float32));
    const std::string cpu = testing::error_message(
        [&] { backend.float32(Device::cpu(), &c, &a, false, &b, false, 1, 1, 1, 1.f, 0.f); });
    EXPECT_NE(cpu.find("'" + name + "'"), std::string::npos) << cpu;
    EXPECT_NE(cpu.find("runs on CUDA devices, got cpu"), std::string::npos) << cpu;
    EXPECT_THROW(backend.float32(Device::cpu(), &c, &a, false, &b, false, 1, 1, 1, 1.f, 0.f),
                 DeviceError);
    const std::string negative = testing::error_message(
        [&] { backend.float32(Device::cuda(0), &c, &a, false, &b, false, 2, -1, 3, 1.f, 0.f); });
    EXPECT_NE(negative.find("sizes must be >= 0, got m = 2, n = -1, k = 3"), std::string::npos)
        << negative;
    EXPECT_THROW(backend.float32(Device::cuda(0), &c, &a, false, &b, false, 2, -1, 3, 1.f, 0.f),
                 ValueError);
  }
}

// ---- on the GPU ----

struct Case {
  int64_t m, n, k;
};
// Odd sizes hit every tail of every tile; 128^3 is whole tiles; k = 0 is the empty product.
const Case kCases[] = {{1, 1, 1},   {17, 33, 65},    {1000, 1, 1000}, {129, 127, 63}, {1, 1000, 7},
                       {64, 48, 0}, {128, 128, 128}, {257, 130, 33},  {33, 260, 16}};

struct Scale {
  float alpha, beta;
};
const Scale kScales[] = {{1.f, 0.f}, {2.f, 0.f}, {1.f, 1.f}, {-1.f, 0.5f}};

class CudaGemmLadder : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!kLadderBuilt) GTEST_SKIP() << "CPU-only build: the CUDA GEMM ladder is not compiled";
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: " << cuda_unavailable_reason();
    backend_ = find_backend(GetParam());
    ASSERT_TRUE(static_cast<bool>(backend_.float32));
  }
  GemmBackend backend_;
};

// A host vector on the GPU at `offset` floats past an allocation's start (offset 1 makes every row
// misaligned for float4 loads).
struct DeviceBuffer {
  Tensor storage;
  float* ptr;
  DeviceBuffer(const std::vector<float>& v, int64_t offset) {
    std::vector<float> padded(static_cast<size_t>(offset) + v.size() + 1, 0.f);  // + 1: never empty
    std::copy(v.begin(), v.end(), padded.begin() + offset);
    storage = Tensor::from_vector(padded, {static_cast<int64_t>(padded.size())}, Device::cuda(0));
    ptr = storage.data<float>() + offset;
  }
  std::vector<float> read(int64_t offset, int64_t n) const {
    synchronize(Device::cuda(0));
    const std::vector<float> all = storage.to_vector<float>();
    return std::vector<float>(all.begin() + offset, all.begin() + offset + n);
  }
};

// C = alpha op(A) op(B) + beta C on the CPU: exact on small integers, as cuBLAS is.
std::vector<float> cpu_gemm(const Case& p, bool ta, bool tb, Scale s, const std::vector<float>& a,
                            const std::vector<float>& b, std::vector<float> c) {
  gemm_cpu<float>(c.data(), a.data(), ta, b.data(), tb, p.m, p.n, p.k, s.alpha, s.beta);
  return c;
}

// Runs `backend` and cuBLAS (the CPU GEMM on emulated GPUs) on the same inputs; returns {got,
// want}.
std::pair<std::vector<float>, std::vector<float>> run_both(const GemmBackend& backend,
                                                           const Case& p, bool ta, bool tb, Scale s,
                                                           const std::vector<float>& a,
                                                           const std::vector<float>& b,
                                                           const std::vector<float>& c,
                                                           int64_t offset) {
  const Device d = Device::cuda(0);
  DeviceBuffer da(a, offset), db(b, offset), dc(c, offset), dref(c, offset);
  backend.float32(d, dc.ptr, da.ptr, ta, db.ptr, tb, p.m, p.n, p.k, s.alpha, s.beta);
#if MINITRAIN_WITH_CUDA_LIBS
  gemm_cublas<float>(d, dref.ptr, da.ptr, ta, db.ptr, tb, p.m, p.n, p.k, s.alpha, s.beta);
  return {dc.read(offset, p.m * p.n), dref.read(offset, p.m * p.n)};
#else
  (void)dref;
  // Emulated GPUs have no cuBLAS: the CPU GEMM is the reference, exact too on small integers.
  return {dc.read(offset, p.m * p.n), cpu_gemm(p, ta, tb, s, a, b, c)};
#endif
}

std::vector<float> initial_c(int64_t count, float beta, uint32_t seed) {
  // beta == 0 must ignore C entirely: NaN there would poison any kernel that reads it.
  if (beta == 0.f)
    return std::vector<float>(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN());
  return testing::random_small_ints(count, seed, -3, 3);
}

::testing::AssertionResult exactly_equal(const std::vector<float>& got,
                                         const std::vector<float>& want, int64_t n) {
  int64_t mismatches = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++mismatches;
    }
  if (mismatches == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << mismatches << " of " << want.size() << " elements differ; first C(" << first / n << ", "
         << first % n << ") = " << got[first] << ", cuBLAS " << want[first];
}

// Emulated GPUs, thousands of times slower, take each shape's four transpositions with one scale
// each, a different one per transposition (a quarter of the work: every shape still meets every
// scale and every transposition); a GPU takes every combination.
bool takes_combination(int shape, bool ta, bool tb, int scale) {
  if (!MINITRAIN_CUDA_EMULATED) return true;
  return (shape + 2 * int(ta) + int(tb)) % 4 == scale;
}

TEST_P(CudaGemmLadder, MatchesCublasExactlyOnSmallIntegers) {
  uint32_t seed = 100;
  for (int shape = 0; shape < int(std::size(kCases)); ++shape)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int scale = 0; scale < int(std::size(kScales)); ++scale) {
          if (!takes_combination(shape, ta, tb, scale)) continue;
          const Case& p = kCases[shape];
          const Scale s = kScales[scale];
          SCOPED_TRACE(::testing::Message()
                       << GetParam() << " m " << p.m << " n " << p.n << " k " << p.k << " trans_a "
                       << ta << " trans_b " << tb << " alpha " << s.alpha << " beta " << s.beta);
          const std::vector<float> a = testing::random_small_ints(p.m * p.k, ++seed, -3, 3);
          const std::vector<float> b = testing::random_small_ints(p.k * p.n, ++seed, -3, 3);
          const std::vector<float> c = initial_c(p.m * p.n, s.beta, ++seed);
          const auto [got, want] = run_both(backend_, p, ta, tb, s, a, b, c, /*offset=*/0);
          // A reference that is all zeros proves nothing unless the exact product is zero too (a
          // 1x1x1 product of small integers can be): the exact result is the CPU's.
          ASSERT_TRUE(exactly_equal(want, cpu_gemm(p, ta, tb, s, a, b, c), p.n))
              << "the reference GEMM disagrees with the exact product";
          ASSERT_TRUE(exactly_equal(got, want, p.n));
        }
}

// Pointers one float past a 16-byte boundary, and leading dimensions 4 | ld and 4 !| ld: the
// vectorized kernels must fall back to scalar loads and still agree exactly.
TEST_P(CudaGemmLadder, MisalignedRowsMatchCublasExactly) {
  uint32_t seed = 900;
  for (const Case& p : {Case{64, 128, 32}, Case{130, 68, 20}, Case{31, 37, 41}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << GetParam() << " misaligned m " << p.m << " n " << p.n << " k " << p.k
                     << " trans_a " << ta << " trans_b " << tb);
        const std::vector<float> a = testing::random_small_ints(p.m * p.k, ++seed, -3, 3);
        const std::vector<float> b = testing::random_small_ints(p.k * p.n, ++seed, -3, 3);
        const std::vector<float> c = testing::random_small_ints(p.m * p.n, ++seed, -3, 3);
        const auto [got, want] = run_both(backend_, p, ta, tb, {1.f, 1.f}, a, b, c, /*offset=*/1);
        ASSERT_TRUE(exactly_equal(got, want, p.n));
      }
}

// Random inputs: the FP32 variants sum in another order than cuBLAS, so they agree to rounding;
// TF32 (10-bit mantissa) and BF16 (7-bit) inputs differ by their input rounding, about
// 2^-11 and 2^-8 relative per product, over k = 300 products of magnitude <= 1.
TEST_P(CudaGemmLadder, RandomInputsAgreeWithCublasWithinRounding) {
  const GemmBackend& backend = backend_;
  const double atol = GetParam() == "tc_bf16" ? 0.25 : GetParam() == "tc_tf32" ? 0.03 : 1e-4;
  // k = 300 sets the rounding; m and n only repeat it, so emulated GPUs take fewer rows and columns
  // (still past several tiles of every rung, and not multiples of them).
  const Case p = MINITRAIN_CUDA_EMULATED ? Case{131, 97, 300} : Case{515, 387, 300};
  uint32_t seed = 7;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << GetParam() << " trans_a " << ta << " trans_b " << tb);
      const std::vector<float> a = testing::random_floats(p.m * p.k, ++seed);
      const std::vector<float> b = testing::random_floats(p.k * p.n, ++seed);
      const std::vector<float> c = testing::random_floats(p.m * p.n, ++seed);
      const auto [got, want] = run_both(backend, p, ta, tb, {1.5f, -0.5f}, a, b, c, /*offset=*/0);
      ASSERT_TRUE(testing::allclose(std::vector<double>(got.begin(), got.end()),
                                    std::vector<double>(want.begin(), want.end()), atol, 1e-4));
    }
}

INSTANTIATE_TEST_SUITE_P(Ladder, CudaGemmLadder, ::testing::ValuesIn(kLadder),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace minitrain
