// One thread's float32 GEMM rate per library on the MLP step's shapes, as % of one core's
// measured peak (Note [peak FP32] in core/cpu_features.h): the comparison behind minitrain's
// choice of CPU BLAS (Note [OpenBLAS core] in kernels/gemm/openblas_core.h). Built and run by
// bench/compare_cpu_blas.sh, once per library (their cblas symbols clash), with -DUSE_CBLAS
// (OpenBLAS or BLIS), -DUSE_DNNL (oneDNN's dnnl_sgemm) or -DUSE_EIGEN (Eigen's own kernels,
// compiled for the flags given).
//
//   blas_choice LABEL     prints "LABEL shape GFLOP/s pct_of_core_peak" per shape

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/cpu_features.h"

#if defined(USE_CBLAS)
#include <cblas.h>
#elif defined(USE_DNNL)
#include <dnnl.h>
#elif defined(USE_EIGEN)
#include <Eigen/Core>
#endif

namespace {

struct Shape {
  const char* name;
  int m, n, k;
  bool ta, tb;
};

// Row-major C[m,n] = op(A) op(B), as Linear's three GEMMs call it.
void sgemm(const Shape& s, const float* a, const float* b, float* c) {
  const int lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n;
#if defined(USE_CBLAS)
  cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans,
              s.m, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c, s.n);
#elif defined(USE_DNNL)
  dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.m, s.n, s.k, 1.f, a, lda, b, ldb, 0.f, c, s.n);
#elif defined(USE_EIGEN)
  using M = Eigen::Matrix<float, -1, -1, Eigen::RowMajor>;
  Eigen::Map<const M> A(a, s.ta ? s.k : s.m, s.ta ? s.m : s.k);
  Eigen::Map<const M> B(b, s.tb ? s.n : s.k, s.tb ? s.k : s.n);
  Eigen::Map<M> C(c, s.m, s.n);
  if (!s.ta && !s.tb) C.noalias() = A * B;
  if (!s.ta && s.tb) C.noalias() = A * B.transpose();
  if (s.ta && !s.tb) C.noalias() = A.transpose() * B;
  if (s.ta && s.tb) C.noalias() = A.transpose() * B.transpose();
#endif
}

}  // namespace

int main(int argc, char** argv) {
  const std::string label = argc > 1 ? argv[1] : "?";
#if defined(USE_CBLAS) && defined(OPENBLAS_THREAD)
  openblas_set_num_threads(1);
#endif
#if defined(USE_EIGEN)
  Eigen::setNbThreads(1);
#endif
  const Shape shapes[] = {
      {"fwd_xWt_256x1024x1024", 256, 1024, 1024, false, true},
      {"bwd_dytx_1024x1024x256", 1024, 1024, 256, true, false},
      {"bwd_dyW_256x1024x1024", 256, 1024, 1024, false, false},
      {"fwd_xWt_256x256x256", 256, 256, 256, false, true},
      {"bwd_dytx_256x256x256", 256, 256, 256, true, false},
      {"fwd_xWt_256x64x64", 256, 64, 64, false, true},
      {"bwd_dytx_64x64x256", 64, 64, 256, true, false},
  };
  const double core_peak = minitrain::cpu_peak_fp32().gflops() / minitrain::cpu_peak_fp32().cores;
  for (const Shape& s : shapes) {
    std::vector<float> a(size_t(s.m) * s.k), b(size_t(s.k) * s.n), c(size_t(s.m) * s.n);
    for (size_t i = 0; i < a.size(); ++i) a[i] = float(i % 7) * 0.25f;
    for (size_t i = 0; i < b.size(); ++i) b[i] = float(i % 5) * 0.5f;
    const double flops = 2.0 * s.m * s.n * s.k;
    const int calls = std::max(1, int(2e8 / flops));  // ~10-50 ms a round
    double best = 1e30;
    for (int round = 0; round < 15; ++round) {  // the least disturbed round: a shared machine
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) sgemm(s, a.data(), b.data(), c.data());
      const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
      best = std::min(best, dt.count() / calls);
    }
    std::printf("%-28s %-26s %8.1f GFLOP/s %6.1f%% of one core's peak\n", label.c_str(), s.name,
                flops / best * 1e-9, 100.0 * flops / best * 1e-9 / core_peak);
  }
  return 0;
}
