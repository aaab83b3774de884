// The GEMM registry: every CPU backend against a float64 triple loop written here, on odd shapes
// and every transpose, with alpha/beta, NaN in C under beta = 0, and k = 0; registration rules
// and the errors gemm_with gives. On a GPU: every CUDA backend against cuBLAS on small-integer
// inputs (products and sums exact in float32, and in TF32/BF16 inputs too), and cuBLASLt's fused
// bias + activation epilogues against the unfused ops.

#include "kernels/gemm/gemm_registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "kernels/activation.h"
#include "kernels/bias_add.h"
#include "kernels/cast.h"
#include "kernels/gemm/gemm.h"
#include "tests/support/test_util.h"

#if MINITRAIN_WITH_CUDA_LIBS
#include "kernels/gemm/gemm_cublaslt.h"
#endif

namespace minitrain {
namespace {

using testing::error_message;
using testing::host_values;

// A float32-only CPU backend registered the way a user's binary does: it forwards to OpenBLAS
// and counts its calls, so a test can see that gemm_with really went through it.
std::atomic<int> g_counted_calls{0};
void counted_sgemm(Device, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                   int64_t n, int64_t k, float alpha, float beta) {
  ++g_counted_calls;
  gemm_cpu<float>(c, a, ta, b, tb, m, n, k, alpha, beta);
}
GemmBackend counting_backend() {
  return GemmBackend{"test_counted_sgemm",
                     DeviceType::CPU,
                     "test: OpenBLAS behind a call counter",
                     false,
                     &counted_sgemm,
                     {}};
}
MINITRAIN_REGISTER_GEMM(test_counted_sgemm, counting_backend())

struct Problem {
  int64_t m, k, n;
};

// The shapes of issue 4: 1x1x1, tails in every dimension, a skinny k = 1 and sizes one off a
// power of two (as m x k x n).
const Problem kShapes[] = {{1, 1, 1}, {17, 33, 65}, {1000, 1, 1000}, {129, 127, 63}};

Shape stored(int64_t rows, int64_t cols, bool trans) {
  return trans ? Shape{cols, rows} : Shape{rows, cols};
}

// C = alpha * op(A) op(B) + beta * C in double; A stored [m, k] ([k, m] when trans_a).
std::vector<double> reference_gemm(const std::vector<double>& a, bool trans_a,
                                   const std::vector<double>& b, bool trans_b, Problem p,
                                   double alpha, double beta, std::vector<double> c) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < p.k; ++q)
        acc += (trans_a ? a[q * p.m + i] : a[i * p.k + q]) *
               (trans_b ? b[j * p.k + q] : b[q * p.n + j]);
      double& cij = c[i * p.n + j];
      cij = alpha * acc + (beta == 0 ? 0.0 : beta * cij);
    }
  return c;
}

// ---- every CPU backend against the float64 reference ----

struct CpuCase {
  std::string backend;
  DType dtype;
};

class CpuGemmBackend : public ::testing::TestWithParam<CpuCase> {};

TEST_P(CpuGemmBackend, MatchesFloat64ReferenceOnOddShapesAllTransposes) {
  const auto [backend, dtype] = GetParam();
  for (const Problem p : kShapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {0.5, 2.0}, {-1.5, 1.0}}) {
          SCOPED_TRACE(::testing::Message()
                       << backend << " " << dtype << " m=" << p.m << " k=" << p.k << " n=" << p.n
                       << " trans_a=" << ta << " trans_b=" << tb << " alpha=" << alpha
                       << " beta=" << beta);
          const uint32_t seed = uint32_t(p.m * 7 + p.k * 3 + p.n + 2 * ta + tb);
          Tensor a = testing::random_tensor(stored(p.m, p.k, ta), seed, Device::cpu(), dtype);
          Tensor b = testing::random_tensor(stored(p.k, p.n, tb), seed + 1, Device::cpu(), dtype);
          Tensor c = testing::random_tensor(Shape{p.m, p.n}, seed + 2, Device::cpu(), dtype);
          const std::vector<double> want = reference_gemm(host_values(a), ta, host_values(b), tb, p,
                                                          alpha, beta, host_values(c));
          gemm_with(backend, c, a, ta, b, tb, alpha, beta);
          ASSERT_GT(testing::host_max_abs(c), 0.0);
          // Rounding grows with the k products summed: float32's 2^-24 per step, float64's 2^-53.
          const double eps = dtype == DType::Float32 ? 1e-6 : 1e-14;
          EXPECT_ALLCLOSE(host_values(c), want, 4 * eps * double(p.k + 2), 4 * eps);
        }
}

TEST_P(CpuGemmBackend, BetaZeroOverwritesNaN) {
  const auto [backend, dtype] = GetParam();
  for (int64_t k : {int64_t(0), int64_t(5)}) {  // k = 0 is the empty product: C = beta * C = 0
    Tensor a = testing::random_tensor(Shape{3, k}, 1, Device::cpu(), dtype);
    Tensor b = testing::random_tensor(Shape{k, 4}, 2, Device::cpu(), dtype);
    Tensor c =
        Tensor::from_vector(std::vector<double>(12, std::numeric_limits<double>::quiet_NaN()),
                            Shape{3, 4}, Device::cpu());
    if (dtype == DType::Float32)
      c = Tensor::from_vector(std::vector<float>(12, std::numeric_limits<float>::quiet_NaN()),
                              Shape{3, 4});
    gemm_with(backend, c, a, false, b, false, 1.0, 0.0);
    const std::vector<double> want = reference_gemm(host_values(a), false, host_values(b), false,
                                                    {3, k, 4}, 1.0, 0.0, std::vector<double>(12));
    for (double v : host_values(c)) EXPECT_FALSE(std::isnan(v)) << backend << " k=" << k;
    EXPECT_ALLCLOSE(host_values(c), want, 1e-6, 1e-6);
  }
}

TEST_P(CpuGemmBackend, EmptyProductScalesByBeta) {
  const auto [backend, dtype] = GetParam();
  Tensor a = Tensor::empty(Shape{4, 0}, dtype), b = Tensor::empty(Shape{0, 3}, dtype);
  Tensor c = testing::random_tensor(Shape{4, 3}, 9, Device::cpu(), dtype);
  std::vector<double> want = host_values(c);
  for (double& v : want) v *= 2.5;
  gemm_with(backend, c, a, false, b, false, 1.0, 2.5);
  EXPECT_ALLCLOSE(host_values(c), want, 0.0, 1e-7);
  // m == 0 touches nothing and throws nothing.
  Tensor c0 = Tensor::empty(Shape{0, 3}, dtype), a0 = Tensor::empty(Shape{0, 2}, dtype);
  Tensor b0 = testing::random_tensor(Shape{2, 3}, 1, Device::cpu(), dtype);
  EXPECT_NO_THROW(gemm_with(backend, c0, a0, false, b0, false));
}

std::vector<CpuCase> cpu_cases() {
  return {{"openblas", DType::Float32},  {"openblas", DType::Float64},
          {"eigen", DType::Float32},     {"eigen", DType::Float64},
          {"reference", DType::Float32}, {"reference", DType::Float64}};
}
INSTANTIATE_TEST_SUITE_P(Builtins, CpuGemmBackend, ::testing::ValuesIn(cpu_cases()),
                         [](const ::testing::TestParamInfo<CpuCase>& info) {
                           return info.param.backend +
                                  (info.param.dtype == DType::Float32 ? "_f32" : "_f64");
                         });

// ---- the registry ----

TEST(GemmRegistry, BuiltinsAreRegisteredForTheirDevices) {
  const std::vector<std::string> cpu = gemm_backend_names(DeviceType::CPU);
  ASSERT_GE(cpu.size(), 2u);
  EXPECT_EQ(cpu[0], "openblas");
  EXPECT_EQ(cpu[1], "eigen");
  EXPECT_EQ(gemm_backend("eigen").device, DeviceType::CPU);
  EXPECT_TRUE(static_cast<bool>(gemm_backend("openblas").float64));
  EXPECT_FALSE(gemm_backend("openblas").technique.empty());
  EXPECT_EQ(default_gemm_backend(Device::cpu()), "openblas");
  EXPECT_EQ(default_gemm_backend(Device::cuda(0)), "cublas");
  const std::vector<std::string> cuda = gemm_backend_names(DeviceType::CUDA);
  if (cuda_compiled()) {
    ASSERT_GE(cuda.size(), 4u);
    EXPECT_EQ(cuda[0], "cublas");
    EXPECT_EQ(cuda[1], "cublas_tf32");
    EXPECT_EQ(cuda[2], "cublas_bf16");
    EXPECT_EQ(cuda[3], "cublaslt");
    EXPECT_TRUE(gemm_backend("cublas_tf32").reduced_precision_inputs);
    // cuBLAS's BF16 reference rounds its inputs as the ladder's tc_bf16 does: no float16 runs.
    const GemmBackend& bf16 = gemm_backend("cublas_bf16");
    EXPECT_TRUE(bf16.reduced_precision_inputs);
    EXPECT_TRUE(gemm_backend_takes(bf16, DType::BFloat16));
    EXPECT_FALSE(gemm_backend_takes(bf16, DType::Float16));
  } else {
    EXPECT_TRUE(cuda.empty()) << "a CPU-only build registers no CUDA backend";
  }
}

TEST(GemmRegistry, UserBackendFromStaticRegistrationIsCalled) {
  ASSERT_TRUE(has_gemm_backend("test_counted_sgemm"));
  Tensor a = testing::random_tensor(Shape{5, 7}, 1), b = testing::random_tensor(Shape{7, 3}, 2);
  Tensor got = Tensor::empty(Shape{5, 3}), want = Tensor::empty(Shape{5, 3});
  const int before = g_counted_calls.load();
  gemm_with("test_counted_sgemm", got, a, false, b, false);
  EXPECT_EQ(g_counted_calls.load(), before + 1);
  gemm(want, a, false, b, false);
  EXPECT_EQ(host_values(got), host_values(want));
}

TEST(GemmRegistry, AutoIsTheDefaultBackendBitForBit) {
  Tensor a = testing::random_tensor(Shape{67, 129}, 3),
         b = testing::random_tensor(Shape{33, 129}, 4);
  Tensor got = Tensor::empty(Shape{67, 33}), want = Tensor::empty(Shape{67, 33});
  gemm_with("auto", got, a, false, b, true);
  gemm(want, a, false, b, true);
  ASSERT_GT(testing::host_max_abs(got), 0.0);
  EXPECT_EQ(host_values(got), host_values(want));
}

TEST(GemmRegistry, UnknownNameListsTheRegisteredOnes) {
  EXPECT_THROW(gemm_backend("no_such_gemm"), ValueError);
  const std::string msg = error_message([] { (void)gemm_backend("no_such_gemm"); });
  EXPECT_NE(msg.find("'no_such_gemm'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("openblas"), std::string::npos) << msg;
  EXPECT_NE(msg.find("eigen"), std::string::npos) << msg;
  EXPECT_NE(msg.find("auto"), std::string::npos) << msg;
  EXPECT_FALSE(has_gemm_backend("no_such_gemm"));
  Tensor a = Tensor::zeros(Shape{2, 2}), b = Tensor::zeros(Shape{2, 2}),
         c = Tensor::zeros(Shape{2, 2});
  EXPECT_THROW(gemm_with("no_such_gemm", c, a, false, b, false), ValueError);
}

TEST(GemmRegistry, RejectsDuplicateEmptyReservedAndIncompleteBackends) {
  GemmBackend dup = gemm_backend("eigen");
  EXPECT_THROW(register_gemm_backend(dup), ValueError);
  std::string msg = error_message([&] { register_gemm_backend(dup); });
  EXPECT_NE(msg.find("'eigen' is already registered"), std::string::npos) << msg;
  EXPECT_THROW(register_gemm_backend(GemmBackend{
                   "test_counted_sgemm", DeviceType::CPU, "", false, &counted_sgemm, {}}),
               ValueError);

  GemmBackend unnamed{"", DeviceType::CPU, "", false, &counted_sgemm, {}};
  msg = error_message([&] { register_gemm_backend(unnamed); });
  EXPECT_NE(msg.find("empty name"), std::string::npos) << msg;
  GemmBackend reserved{"auto", DeviceType::CPU, "", false, &counted_sgemm, {}};
  msg = error_message([&] { register_gemm_backend(reserved); });
  EXPECT_NE(msg.find("'auto' is reserved"), std::string::npos) << msg;
  GemmBackend no_float32{"test_no_float32", DeviceType::CPU, "", false, {}, {}};
  msg = error_message([&] { register_gemm_backend(no_float32); });
  EXPECT_NE(msg.find("no float32 function"), std::string::npos) << msg;
  EXPECT_FALSE(has_gemm_backend("test_no_float32"));
}

TEST(GemmRegistry, BackendForAnotherDeviceTypeIsRefusedNamingBoth) {
  // A CUDA backend (never called here) used on CPU tensors.
  register_gemm_backend(
      GemmBackend{"test_fake_cuda",
                  DeviceType::CUDA,
                  "test: never runs",
                  false,
                  [](Device, float*, const float*, bool, const float*, bool, int64_t, int64_t,
                     int64_t, float, float) { FAIL() << "must not be called"; },
                  {}});
  Tensor a = Tensor::zeros(Shape{2, 3}), b = Tensor::zeros(Shape{3, 4}),
         c = Tensor::zeros(Shape{2, 4});
  EXPECT_THROW(gemm_with("test_fake_cuda", c, a, false, b, false), ValueError);
  const std::string msg =
      error_message([&] { gemm_with("test_fake_cuda", c, a, false, b, false); });
  EXPECT_NE(msg.find("'test_fake_cuda' runs on cuda"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on cpu"), std::string::npos) << msg;
}

TEST(GemmRegistry, BackendWithoutTheDtypeIsRefusedNamingBackendDeviceAndDtype) {
  Tensor a = Tensor::zeros(Shape{2, 3}, DType::Float64),
         b = Tensor::zeros(Shape{3, 4}, DType::Float64);
  Tensor c = Tensor::zeros(Shape{2, 4}, DType::Float64);
  const int before = g_counted_calls.load();
  EXPECT_THROW(gemm_with("test_counted_sgemm", c, a, false, b, false), ValueError);
  const std::string msg =
      error_message([&] { gemm_with("test_counted_sgemm", c, a, false, b, false); });
  EXPECT_NE(msg.find("'test_counted_sgemm' has no float64"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cpu"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float64"), std::string::npos) << msg;
  EXPECT_EQ(g_counted_calls.load(), before);
}

TEST(GemmRegistry, ChecksShapesAsGemmDoes) {
  Tensor a = Tensor::zeros(Shape{8, 16}), b = Tensor::zeros(Shape{8, 4}),
         c = Tensor::zeros(Shape{8, 4});
  EXPECT_THROW(gemm_with("eigen", c, a, false, b, false), ShapeError);
  std::string msg = error_message([&] { gemm_with("eigen", c, a, false, b, false); });
  EXPECT_NE(msg.find("gemm_with: inner dimensions differ: op(a) is [8, 16]"), std::string::npos)
      << msg;
  Tensor wrong_c = Tensor::zeros(Shape{8, 5}), b2 = Tensor::zeros(Shape{16, 4});
  msg = error_message([&] { gemm_with("eigen", wrong_c, a, false, b2, false); });
  EXPECT_NE(msg.find("c is [8, 5] but op(a) op(b) is [8, 4]"), std::string::npos) << msg;
  Tensor d = Tensor::zeros(Shape{16, 4}, DType::Float64);
  EXPECT_THROW(gemm_with("eigen", c, a, false, d, false), DTypeError);
  Tensor sq = Tensor::zeros(Shape{4, 4});
  EXPECT_THROW(gemm_with("openblas", sq, sq, false, sq, false), ValueError);  // c aliases a
}

TEST(GemmRegistry, ConcurrentRegistrationAndLookup) {
  constexpr int kThreads = 4, kEach = 25;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string name = "test_concurrent_" + std::to_string(t) + "_" + std::to_string(i);
        register_gemm_backend(GemmBackend{name, DeviceType::CPU, "", false, &counted_sgemm, {}});
        EXPECT_EQ(gemm_backend(name).name, name);
        EXPECT_EQ(gemm_backend("openblas").name, "openblas");
      }
    });
  for (auto& th : threads) th.join();
  int found = 0;
  for (const std::string& n : gemm_backend_names(DeviceType::CPU))
    found += n.rfind("test_concurrent_", 0) == 0;
  EXPECT_EQ(found, kThreads * kEach);
}

// ---- CUDA: every backend against cuBLAS, exactly ----

Tensor small_int_tensor(const Shape& s, uint32_t seed, Device d) {
  return Tensor::from_vector(testing::random_small_ints(s.numel(), seed), s, d);
}

TEST(GemmRegistryCuda, EveryCudaBackendMatchesCublasExactlyOnIntegers) {
  if (cuda_emulated()) GTEST_SKIP() << "needs cuBLAS on a real GPU (the emulated GPUs have none)";
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Device d = Device::cuda(0);
  for (const std::string& name : gemm_backend_names(DeviceType::CUDA)) {
    if (name.rfind("test_", 0) == 0) continue;  // this binary's fakes
    for (const Problem p : kShapes)
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (auto [alpha, beta] : {std::pair{1.0, 0.0}, {2.0, -1.0}}) {
            SCOPED_TRACE(::testing::Message()
                         << name << " m=" << p.m << " k=" << p.k << " n=" << p.n
                         << " trans_a=" << ta << " trans_b=" << tb << " beta=" << beta);
            const uint32_t seed = uint32_t(p.m + 5 * p.k + 11 * p.n + 2 * ta + tb);
            Tensor a = small_int_tensor(stored(p.m, p.k, ta), seed, d);
            Tensor b = small_int_tensor(stored(p.k, p.n, tb), seed + 1, d);
            Tensor c0 = small_int_tensor(Shape{p.m, p.n}, seed + 2, d);
            // Under beta = 0 the backend's C starts as NaN: it must be overwritten, never scaled.
            Tensor got = beta == 0.0
                             ? Tensor::from_vector(
                                   std::vector<float>(size_t(p.m * p.n),
                                                      std::numeric_limits<float>::quiet_NaN()),
                                   Shape{p.m, p.n}, d)
                             : c0.clone();
            Tensor want = c0.clone();
            gemm_with(name, got, a, ta, b, tb, alpha, beta);
            gemm_with("cublas", want, a, ta, b, tb, alpha, beta);
            ASSERT_GT(testing::host_max_abs(want), 0.0);
            ASSERT_GT(testing::host_max_abs(got), 0.0);
            EXPECT_EQ(host_values(got), host_values(want));
          }
    // k = 0, the empty product: C = beta * C, and with beta = 0 zeros even over NaN.
    SCOPED_TRACE(name + " k=0");
    Tensor a = Tensor::empty(Shape{5, 0}, DType::Float32, d),
           b = Tensor::empty(Shape{0, 7}, DType::Float32, d);
    Tensor c = small_int_tensor(Shape{5, 7}, 1, d);
    std::vector<double> want = host_values(c);
    for (double& v : want) v *= -1.0;
    gemm_with(name, c, a, false, b, false, 2.0, -1.0);
    ASSERT_GT(testing::host_max_abs(c), 0.0);
    EXPECT_EQ(host_values(c), want);
    Tensor nan_c = Tensor::from_vector(
        std::vector<float>(35, std::numeric_limits<float>::quiet_NaN()), Shape{5, 7}, d);
    gemm_with(name, nan_c, a, false, b, false, 1.0, 0.0);
    EXPECT_EQ(host_values(nan_c), std::vector<double>(35, 0.0));
  }
}

#if MINITRAIN_WITH_CUDA_LIBS
Tensor scaled(const Tensor& t, double factor) {
  std::vector<float> v;
  for (double x : host_values(t)) v.push_back(float(x * factor));
  return Tensor::from_vector(v, t.shape(), t.device());
}

// act(x W^T + b) composed from the separate ops on cuBLAS.
Tensor unfused_linear(const Tensor& x, const Tensor& w, const Tensor& b,
                      std::optional<Activation> act) {
  Tensor y = Tensor::empty(Shape{x.size(0), w.size(0)}, x.dtype(), x.device());
  gemm_with("cublas", y, x, false, w, true);
  bias_add(y, y, b);
  if (act) activation_forward(y, y, *act);
  return y;
}
#endif

// The CPU's "reference" and the GPU ladder's "naive" sum each element's products in k order: on
// operands that are 16-bit values (exact products, so a GPU's fused multiply-add rounds as the
// CPU's multiply then add) they give the same bits, the basis of comparing mixed-precision runs
// across devices bit for bit. Random bf16 values, odd shapes, every transpose.
TEST(GemmRegistryCuda, ReferenceOnTheCpuEqualsNaiveOnTheGpuBitForBitOnSixteenBitValues) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  for (const Problem& p : std::vector<Problem>{{1, 1, 1}, {7, 13, 5}, {33, 65, 17}, {64, 300, 31}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const uint32_t seed = uint32_t(p.m * 5 + p.k + 3 * p.n + 2 * ta + tb);
        const auto bf16_values = [](const Shape& s, uint32_t sd) {
          Tensor t = testing::random_tensor(s, sd, Device::cpu(), DType::Float32);
          round_to_precision(t, t, DType::BFloat16);
          return t;
        };
        const Tensor a = bf16_values(stored(p.m, p.k, ta), seed);
        const Tensor b = bf16_values(stored(p.k, p.n, tb), seed + 1);
        Tensor c_cpu = Tensor::zeros(Shape{p.m, p.n}, DType::Float32, Device::cpu());
        Tensor c_gpu = Tensor::zeros(Shape{p.m, p.n}, DType::Float32, Device::cuda(0));
        gemm_with("reference", c_cpu, a, ta, b, tb);
        gemm_with("naive", c_gpu, a.to(Device::cuda(0)), ta, b.to(Device::cuda(0)), tb);
        ASSERT_GT(testing::host_max_abs(c_cpu), 0.0);
        EXPECT_EQ(host_values(c_gpu), host_values(c_cpu))
            << "m " << p.m << " k " << p.k << " n " << p.n << " ta " << ta << " tb " << tb;
      }
}

TEST(GemmRegistryCuda, CublasLtFusedEpiloguesMatchUnfusedComposition) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  if (cuda_emulated()) GTEST_SKIP() << "needs cuBLASLt on a real GPU (the emulated GPUs have none)";
#if MINITRAIN_WITH_CUDA_LIBS
  const Device d = Device::cuda(0);
  const std::optional<Activation> acts[] = {std::nullopt, Activation::ReLU, Activation::GELUTanh};
  for (const Problem p : kShapes)
    for (const auto& act : acts) {
      SCOPED_TRACE(::testing::Message() << "m=" << p.m << " k=" << p.k << " n=" << p.n
                                        << " act=" << (act ? activation_name(*act) : "none"));
      // Eighths of small integers make the product and the bias add exact (every partial sum is
      // a multiple of 1/8 far below 2^21), so fused and unfused differ only where the activation's
      // own arithmetic does; the eighths put many pre-activations in GELU's curved range (|x| < 3).
      Tensor x = scaled(small_int_tensor(Shape{p.m, p.k}, 1, d), 0.125);
      Tensor w = small_int_tensor(Shape{p.n, p.k}, 2, d);
      Tensor b = scaled(small_int_tensor(Shape{p.n}, 3, d), 0.125);
      Tensor got = Tensor::empty(Shape{p.m, p.n}, DType::Float32, d);
      linear_forward_cublaslt(got, x, w, b, act);
      Tensor want = unfused_linear(x, w, b, act);
      ASSERT_GT(testing::host_max_abs(want), 0.0);
      if (act && *act == Activation::GELUTanh)
        // cuBLASLt's epilogue may evaluate tanh with the GPU's approximate instruction (relative
        // error ~2^-11) where kernels/activation_math.h calls tanhf: close, not bit-equal.
        EXPECT_ALLCLOSE(got, want, 1e-3, 1e-3);
      else
        EXPECT_EQ(host_values(got), host_values(want));
    }
  Tensor x = small_int_tensor(Shape{4, 3}, 1, d), w = small_int_tensor(Shape{2, 3}, 2, d);
  Tensor b = small_int_tensor(Shape{2}, 3, d), y = Tensor::empty(Shape{4, 2}, DType::Float32, d);
  const std::string msg =
      error_message([&] { linear_forward_cublaslt(y, x, w, b, Activation::Sigmoid); });
  EXPECT_NE(msg.find("no fused epilogue for activation 'sigmoid'"), std::string::npos) << msg;
  Tensor wrong_b = small_int_tensor(Shape{3}, 3, d);
  EXPECT_THROW(linear_forward_cublaslt(y, x, w, wrong_b), ShapeError);
#endif
}

}  // namespace
}  // namespace minitrain
