// GEMM on the CPU through Eigen 3: the product of row-major Maps over minitrain's buffers, so no
// data moves. Eigen packs panels of A and B and runs its own register-blocked kernel, vectorised
// for the instruction set the library is compiled for (baseline x86-64: SSE2), on the OpenMP
// threads that core/parallel_for.h sets. Compute-bound; OpenBLAS's run-time-dispatched AVX2/AVX-512
// kernels outrun it here (see bench/gemm_bench.cpp), which is why "openblas" is the CPU default.

#include <Eigen/Core>

#include "kernels/gemm/gemm_builtin.h"

namespace minitrain {

namespace {

template <typename T>
using RowMajor = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// dst = alpha * op(A) op(B) (+ dst when accumulate): one Eigen expression per transpose pair, so
// that Eigen sees the transposes and picks its packed product instead of materialising them.
template <typename T, typename Dst, typename A, typename B>
void product(Dst& dst, const A& a, bool trans_a, const B& b, bool trans_b, T alpha,
             bool accumulate) {
  auto assign = [&](const auto& opa, const auto& opb) {
    if (accumulate)
      dst.noalias() += alpha * opa * opb;
    else
      dst.noalias() = alpha * opa * opb;
  };
  if (!trans_a && !trans_b) assign(a, b);
  if (!trans_a && trans_b) assign(a, b.transpose());
  if (trans_a && !trans_b) assign(a.transpose(), b);
  if (trans_a && trans_b) assign(a.transpose(), b.transpose());
}

template <typename T>
void gemm_eigen_cpu(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n,
                    int64_t k, T alpha, T beta) {
  if (m == 0 || n == 0) return;
  Eigen::Map<RowMajor<T>> C(c, m, n);
  if (k == 0 || alpha == T(0)) {  // beta * C alone (gemm.h's contract); beta 0 never reads C (NaN)
    if (beta == T(0))
      C.setZero();
    else
      C *= beta;
    return;
  }
  Eigen::Map<const RowMajor<T>> A(a, trans_a ? k : m, trans_a ? m : k);
  Eigen::Map<const RowMajor<T>> B(b, trans_b ? n : k, trans_b ? k : n);
  // beta == 0 assigns without reading C, so NaN in its old contents does not survive.
  if (beta != T(0) && beta != T(1)) C *= beta;
  product<T>(C, A, trans_a, B, trans_b, alpha, /*accumulate=*/beta != T(0));
}

}  // namespace

GemmBackend eigen_gemm_backend() {
  GemmBackend g;
  g.name = "eigen";
  g.device = DeviceType::CPU;
  g.technique = "Eigen 3 packed product on row-major maps, OpenMP threads (compute-bound)";
  g.float32 = [](Device, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha,
                 float beta) { gemm_eigen_cpu<float>(c, a, ta, b, tb, m, n, k, alpha, beta); };
  g.float64 = [](Device, double* c, const double* a, bool ta, const double* b, bool tb, int64_t m,
                 int64_t n, int64_t k, double alpha,
                 double beta) { gemm_eigen_cpu<double>(c, a, ta, b, tb, m, n, k, alpha, beta); };
  return g;
}

}  // namespace minitrain
