// GEMM against a naive triple loop written here. Inputs are small integers, so every product and
// partial sum is an integer below 2^24 and float32 results must be EXACT: any wrong index,
// transpose or leading dimension shows up as a mismatch, never hides inside a tolerance.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/parallel_for.h"
#include "kernels/gemm/gemm.h"
#include "tests/support/test_util.h"

#if MINITRAIN_WITH_CUDA_LIBS
#include "core/blas_handle.h"
#include "core/stream.h"
#endif

namespace minitrain {
namespace {

using testing::host_values;

struct Problem {
  int64_t m, k, n;
};

// C = alpha * op(A) op(B) + beta * C in double; A is stored [m, k] ([k, m] when trans_a).
std::vector<double> naive_gemm(const std::vector<double>& a, bool trans_a,
                               const std::vector<double>& b, bool trans_b, Problem p, double alpha,
                               double beta, std::vector<double> c) {
  for (int64_t i = 0; i < p.m; ++i)
    for (int64_t j = 0; j < p.n; ++j) {
      double acc = 0;
      for (int64_t q = 0; q < p.k; ++q) {
        const double aiq = trans_a ? a[q * p.m + i] : a[i * p.k + q];
        const double bqj = trans_b ? b[j * p.k + q] : b[q * p.n + j];
        acc += aiq * bqj;
      }
      double& cij = c[i * p.n + j];
      cij = alpha * acc + (beta == 0 ? 0.0 : beta * cij);
    }
  return c;
}

std::vector<double> small_ints(int64_t n, uint32_t seed) {
  const std::vector<float> f = testing::random_small_ints(n, seed);
  return std::vector<double>(f.begin(), f.end());
}

Tensor make(const std::vector<double>& v, const Shape& shape, Device d, DType dtype) {
  if (dtype == DType::Float64) return Tensor::from_vector(v, shape, d);
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), shape, d);
}

Shape stored(int64_t rows, int64_t cols, bool trans) {
  return trans ? Shape{cols, rows} : Shape{rows, cols};
}

// Runs gemm on `d` and checks it against the naive loop, exactly.
void expect_exact(Problem p, bool ta, bool tb, double alpha, double beta, Device d,
                  DType dtype = DType::Float32) {
  SCOPED_TRACE(::testing::Message()
               << "m=" << p.m << " k=" << p.k << " n=" << p.n << " trans_a=" << ta
               << " trans_b=" << tb << " alpha=" << alpha << " beta=" << beta << " " << dtype);
  const uint32_t seed = uint32_t(p.m * 131 + p.k * 17 + p.n + 2 * ta + tb);
  const std::vector<double> a = small_ints(p.m * p.k, seed);
  const std::vector<double> b = small_ints(p.k * p.n, seed + 1);
  const std::vector<double> c0 = small_ints(p.m * p.n, seed + 2);
  Tensor ta_t = make(a, stored(p.m, p.k, ta), d, dtype);
  Tensor tb_t = make(b, stored(p.k, p.n, tb), d, dtype);
  Tensor c = make(c0, Shape{p.m, p.n}, d, dtype);
  gemm(c, ta_t, ta, tb_t, tb, alpha, beta);
  const std::vector<double> want = naive_gemm(a, ta, b, tb, p, alpha, beta, c0);
  const std::vector<double> got = host_values(c);
  if (p.m * p.n > 0) {
    ASSERT_GT(testing::host_max_abs(c), 0.0) << "result is all zeros";
  }
  EXPECT_TRUE(testing::allclose(got, want, 0, 0));
}

class GemmTest : public testing::DeviceTest {};

TEST_P(GemmTest, AllTransposesMatchNaiveLoopOnOddShapes) {
  const Problem problems[] = {{1, 1, 1}, {17, 33, 65}, {1000, 1, 1000}, {1, 1000, 1},
                              {3, 2, 1}, {64, 64, 64}, {129, 255, 67},  {256, 512, 128}};
  for (const Problem& p : problems) {
    if (testing::over_size_cap(std::max({p.m * p.k, p.k * p.n, p.m * p.n}))) continue;
    for (bool ta : {false, true})
      for (bool tb : {false, true}) expect_exact(p, ta, tb, 1.0, 0.0, device());
  }
}

TEST_P(GemmTest, AlphaAndBetaScaleExactly) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      expect_exact({17, 33, 65}, ta, tb, 2.0, -3.0, device());
      expect_exact({5, 9, 4}, ta, tb, -1.0, 1.0, device());  // accumulate: C += -AB
      expect_exact({5, 9, 4}, ta, tb, 0.0, 2.0, device());   // alpha 0: only beta * C
    }
}

TEST_P(GemmTest, Float64MatchesNaiveLoop) {
  if (device().is_cuda() && cuda_emulated()) {
    const std::string msg = testing::error_message([&] {
      matmul(Tensor::zeros(Shape{2, 3}, DType::Float64, device()),
             Tensor::zeros(Shape{3, 2}, DType::Float64, device()));
    });
    EXPECT_NE(msg.find("cuBLAS, which has, is absent on emulated GPUs"), std::string::npos) << msg;
    GTEST_SKIP() << "needs cuBLAS on a real GPU (float64 GEMMs on cuda are cuBLAS's; the emulated "
                    "GPUs have none)";
  }
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      expect_exact({33, 71, 19}, ta, tb, 0.5, 0.25, device(), DType::Float64);
  // Non-integer doubles: results agree to double rounding.
  const Problem p{40, 300, 30};
  const std::vector<double> a = testing::random_doubles(p.m * p.k, 11);
  const std::vector<double> b = testing::random_doubles(p.k * p.n, 12);
  const Tensor got = matmul(Tensor::from_vector(a, Shape{p.m, p.k}, device()),
                            Tensor::from_vector(b, Shape{p.k, p.n}, device()));
  const std::vector<double> want =
      naive_gemm(a, false, b, false, p, 1.0, 0.0, std::vector<double>(p.m * p.n));
  EXPECT_TRUE(testing::allclose(host_values(got), want, 1e-13, 1e-13));
}

TEST_P(GemmTest, InnerDimensionZeroGivesBetaTimesC) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      expect_exact({7, 0, 5}, ta, tb, 1.0, 3.0, device());
      expect_exact({7, 0, 5}, ta, tb, 1.0, 1.0, device());
    }
  // beta 0 with k 0: zeros, whatever C held.
  Tensor c = Tensor::from_vector(std::vector<float>(35, std::nanf("")), Shape{7, 5}, device());
  gemm(c, Tensor::zeros(Shape{7, 0}, DType::Float32, device()), false,
       Tensor::zeros(Shape{0, 5}, DType::Float32, device()), false);
  EXPECT_TRUE(testing::allclose(host_values(c), std::vector<double>(35, 0.0), 0, 0));
}

TEST_P(GemmTest, BetaZeroIgnoresNanInC) {
  const std::vector<double> a = small_ints(6 * 4, 20), b = small_ints(4 * 3, 21);
  Tensor c = Tensor::from_vector(std::vector<float>(18, std::nanf("")), Shape{6, 3}, device());
  gemm(c, make(a, Shape{6, 4}, device(), DType::Float32), false,
       make(b, Shape{4, 3}, device(), DType::Float32), false, 1.0, 0.0);
  const std::vector<double> want =
      naive_gemm(a, false, b, false, {6, 4, 3}, 1.0, 0.0, std::vector<double>(18));
  EXPECT_TRUE(testing::allclose(host_values(c), want, 0, 0));
}

TEST_P(GemmTest, EmptyResultIsANoOp) {
  Tensor c = Tensor::zeros(Shape{0, 5}, DType::Float32, device());
  EXPECT_NO_THROW(gemm(c, Tensor::zeros(Shape{0, 3}, DType::Float32, device()), false,
                       Tensor::zeros(Shape{3, 5}, DType::Float32, device()), false));
  const Tensor d = matmul(Tensor::zeros(Shape{4, 3}, DType::Float32, device()),
                          Tensor::zeros(Shape{0, 3}, DType::Float32, device()), false, true);
  EXPECT_EQ(d.shape(), Shape({4, 0}));
}

TEST_P(GemmTest, MatmulBuildsTheLinearLayerProducts) {
  // y = x W^T, dx = dy W, dW = dy^T x for x [8, 5], W [3, 5], as a Linear layer computes them.
  const std::vector<double> x = small_ints(8 * 5, 30), w = small_ints(3 * 5, 31),
                            dy = small_ints(8 * 3, 32);
  const Device d = device();
  const Tensor xt = make(x, Shape{8, 5}, d, DType::Float32);
  const Tensor wt = make(w, Shape{3, 5}, d, DType::Float32);
  const Tensor dyt = make(dy, Shape{8, 3}, d, DType::Float32);
  const Tensor y = matmul(xt, wt, false, true), dx = matmul(dyt, wt), dw = matmul(dyt, xt, true);
  EXPECT_EQ(y.shape(), Shape({8, 3}));
  EXPECT_EQ(dx.shape(), Shape({8, 5}));
  EXPECT_EQ(dw.shape(), Shape({3, 5}));
  EXPECT_EQ(y.device(), d);
  EXPECT_TRUE(testing::allclose(
      host_values(y), naive_gemm(x, false, w, true, {8, 5, 3}, 1, 0, std::vector<double>(24)), 0,
      0));
  EXPECT_TRUE(testing::allclose(
      host_values(dx), naive_gemm(dy, false, w, false, {8, 3, 5}, 1, 0, std::vector<double>(40)), 0,
      0));
  EXPECT_TRUE(testing::allclose(
      host_values(dw), naive_gemm(dy, true, x, false, {3, 8, 5}, 1, 0, std::vector<double>(15)), 0,
      0));
}

TEST_P(GemmTest, InnerMismatchNamesAllShapes) {
  const Device d = device();
  Tensor c = Tensor::zeros(Shape{32, 16}, DType::Float32, d);
  const Tensor a = Tensor::zeros(Shape{32, 7}, DType::Float32, d);
  const Tensor b = Tensor::zeros(Shape{16, 8}, DType::Float32, d);
  EXPECT_THROW(gemm(c, a, false, b, true), ShapeError);
  EXPECT_EQ(testing::error_message([&] { gemm(c, a, false, b, true); }),
            "gemm: inner dimensions differ: op(a) is [32, 7] (a [32, 7]), op(b) is [8, 16] "
            "(b [16, 8], transposed)");
  EXPECT_THROW(matmul(a, b, false, true), ShapeError);
}

TEST_P(GemmTest, WrongOutputShapeOrRankIsShapeError) {
  const Device d = device();
  const Tensor a = Tensor::zeros(Shape{4, 6}, DType::Float32, d);
  const Tensor b = Tensor::zeros(Shape{6, 5}, DType::Float32, d);
  Tensor c = Tensor::zeros(Shape{5, 4}, DType::Float32, d);
  const std::string msg = testing::error_message([&] { gemm(c, a, false, b, false); });
  EXPECT_NE(msg.find("c is [5, 4]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[4, 5]"), std::string::npos) << msg;
  EXPECT_THROW(gemm(c, a, false, b, false), ShapeError);
  Tensor c3 = Tensor::zeros(Shape{4, 5, 1}, DType::Float32, d);
  EXPECT_THROW(gemm(c3, a, false, b, false), ShapeError);
  EXPECT_THROW(matmul(Tensor::zeros(Shape{24}, DType::Float32, d), b), ShapeError);
}

TEST_P(GemmTest, MixedDtypesAreDTypeError) {
  const Device d = device();
  Tensor c = Tensor::zeros(Shape{4, 5}, DType::Float32, d);
  const Tensor a = Tensor::zeros(Shape{4, 6}, DType::Float64, d);
  const Tensor b = Tensor::zeros(Shape{6, 5}, DType::Float32, d);
  EXPECT_THROW(gemm(c, a, false, b, false), DTypeError);
  EXPECT_THROW(matmul(a, b), DTypeError);
}

TEST_P(GemmTest, OutputOverlappingAnInputIsRejected) {
  Tensor a = Tensor::zeros(Shape{4, 4}, DType::Float32, device());
  const Tensor b = Tensor::zeros(Shape{4, 4}, DType::Float32, device());
  EXPECT_THROW(gemm(a, a, false, b, false), ValueError);
  Tensor view = a.reshape({4, 4});
  EXPECT_THROW(gemm(view, b, false, a, false), ValueError);
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(GemmTest);

// ---- CPU only ----

// Each element of C comes from one single-threaded BLAS call (Note [OpenBLAS on OpenMP threads]),
// so splitting C over more threads must not change a bit, for the MLP shapes and odd ones.
TEST(GemmCpu, SameBitsForAnyThreadCount) {
  const Problem problems[] = {{256, 1024, 1024}, {1024, 256, 512}, {1000, 777, 33},
                              {3, 900, 1001},    {128, 256, 128},  {64, 256, 64}};
  const int saved = num_threads();
  for (const Problem& p : problems)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Tensor a = testing::random_tensor(stored(p.m, p.k, ta), 60);
        const Tensor b = testing::random_tensor(stored(p.k, p.n, tb), 61);
        std::vector<std::vector<double>> results;
        for (int threads : {1, 2, 3, 4}) {
          set_num_threads(threads);
          results.push_back(host_values(matmul(a, b, ta, tb)));
        }
        for (size_t t = 1; t < results.size(); ++t)
          EXPECT_TRUE(results[t] == results[0])
              << "m=" << p.m << " k=" << p.k << " n=" << p.n << " ta=" << ta << " tb=" << tb << ": "
              << t + 1 << " threads differ from 1";
      }
  set_num_threads(saved);
}

// GemmCpuExtras: the tile epilogue covers C once, each tile right after its product (it sees the
// product, not older contents), and each side task runs once, for any thread count, on products
// run in parallel and on the calling thread (small), and with k == 0.
TEST(GemmCpu, ExtrasSeeEveryTileOnceAndRunEverySideTaskOnce) {
  const Problem problems[] = {
      {256, 1024, 1024}, {1000, 777, 33}, {3, 5, 7}, {256, 1, 1024}, {64, 0, 64}};
  const int saved = num_threads();
  for (const Problem& p : problems)
    for (int threads : {1, 2, 3}) {
      set_num_threads(threads);
      const Tensor a = testing::random_tensor(Shape{p.m, p.k}, 70);
      const Tensor b = testing::random_tensor(Shape{p.k, p.n}, 71);
      const Tensor want = matmul(a, b);
      std::vector<float> c(size_t(p.m * p.n), std::nanf("")), seen(c.size(), 0.f);
      std::vector<std::atomic<int>> epilogue_hits(c.size()), task_runs(5);
      GemmCpuExtras extras;
      extras.tile_epilogue = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
        for (int64_t r = r0; r < r1; ++r)
          for (int64_t col = c0; col < c1; ++col) {
            seen[size_t(r * p.n + col)] = c[size_t(r * p.n + col)];
            ++epilogue_hits[size_t(r * p.n + col)];
          }
      };
      extras.side_tasks = 5;
      extras.side_task = [&](int64_t t) { ++task_runs[size_t(t)]; };
      gemm_cpu<float>(c.data(), a.data<float>(), false, b.data<float>(), false, p.m, p.n, p.k, 1.f,
                      0.f, extras);
      const std::string what = "m=" + std::to_string(p.m) + " n=" + std::to_string(p.n) +
                               " k=" + std::to_string(p.k) + " threads=" + std::to_string(threads);
      for (size_t i = 0; i < c.size(); ++i)
        ASSERT_EQ(epilogue_hits[i].load(), 1) << what << " i=" << i;
      for (std::atomic<int>& r : task_runs) EXPECT_EQ(r.load(), 1) << what;
      EXPECT_TRUE(std::vector<double>(seen.begin(), seen.end()) == host_values(want)) << what;
    }
  set_num_threads(saved);
}

// parallel_tasks: every index once, whatever the thread count.
TEST(ParallelTasks, RunsEveryTaskOnce) {
  const int saved = num_threads();
  for (int threads : {1, 2, 5})
    for (int64_t n : {0, 1, 2, 7, 100}) {
      set_num_threads(threads);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
      parallel_tasks(n, [&](int64_t i) { ++runs[size_t(i)]; });
      for (std::atomic<int>& r : runs)
        EXPECT_EQ(r.load(), 1) << "threads=" << threads << " n=" << n;
    }
  set_num_threads(saved);
}

// ---- GPU only ----

TEST(GemmCuda, DeviceMismatchIsDeviceError) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  Tensor c = Tensor::zeros(Shape{4, 5}, DType::Float32, Device::cuda(0));
  const Tensor a = Tensor::zeros(Shape{4, 6});
  const Tensor b = Tensor::zeros(Shape{6, 5}, DType::Float32, Device::cuda(0));
  EXPECT_THROW(gemm(c, a, false, b, false), DeviceError);
  const std::string msg = testing::error_message([&] { gemm(c, a, false, b, false); });
  EXPECT_NE(msg.find("a on cpu"), std::string::npos) << msg;
}

TEST(GemmCuda, MatchesCpuOnRandomFloatsInFullFp32) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  // 1024-long dot products of U(-1, 1) values: TF32 (10-bit mantissa) would miss by ~1e-3 here.
  const Tensor a = testing::random_tensor(Shape{96, 1024}, 40);
  const Tensor b = testing::random_tensor(Shape{80, 1024}, 41);
  const Tensor want = matmul(a, b, false, true);
  const Tensor got = matmul(a.to(Device::cuda(0)), b.to(Device::cuda(0)), false, true);
  // cuBLAS sums in blocks; the emulated GPUs' default (the warptile ladder kernel) sums each
  // 1024-long dot product in one float32 chain, which the emulator measured 2.1e-5 off at worst.
  const double tol = cuda_emulated() ? 1e-4 : 1e-5;
  EXPECT_ALLCLOSE(got, want, tol, tol);
}

#if MINITRAIN_CUDA_EMULATED
TEST(GemmCuda, EachThreadHasItsOwnHandleBoundToItsStream) {
  GTEST_SKIP() << "needs cuBLAS on a real GPU (the emulated GPUs have none)";
}
#elif MINITRAIN_WITH_CUDA_LIBS
TEST(GemmCuda, EachThreadHasItsOwnHandleBoundToItsStream) {
  MT_SKIP_UNLESS_AVAILABLE(Device::cuda(0));
  const Device d = Device::cuda(0);
  cublasHandle_t main_handle = cublas_handle(d);
  EXPECT_EQ(cublas_handle(d), main_handle);  // created once per thread
  cudaStream_t bound = nullptr;
  ASSERT_EQ(cublasGetStream(main_handle, &bound), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(bound, current_stream(d).native_handle());

  // Four threads at once, each multiplying on its own handle and stream.
  const Tensor a = testing::random_tensor(Shape{128, 256}, 50);
  const Tensor b = testing::random_tensor(Shape{256, 64}, 51);
  const Tensor want = matmul(a, b);
  std::vector<cublasHandle_t> handles(4);
  std::vector<Tensor> results(4);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      handles[t] = cublas_handle(d);
      Tensor ga = a.to(d), gb = b.to(d);
      for (int i = 0; i < 10; ++i) results[t] = matmul(ga, gb).to(Device::cpu());
      // Stay alive until all have their handles: an exited thread's handle address may be reused.
      done.fetch_add(1);
      while (done.load() < 4) std::this_thread::yield();
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    EXPECT_NE(handles[t], main_handle);
    for (int u = 0; u < t; ++u) EXPECT_NE(handles[t], handles[u]);
    EXPECT_ALLCLOSE(results[t], want, 1e-5, 1e-5);
  }
}
#endif

}  // namespace
}  // namespace minitrain
