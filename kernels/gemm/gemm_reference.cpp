// The CPU's reference GEMM: one float accumulator per C element, summed over k in order, then
// the ladder's own store (gemm_ladder/gemm_tiling.h store_c), which is exactly what the CUDA
// ladder's naive rung computes per element. Products of 16-bit values are exact in float32 (8 x 8
// and 11 x 11 significant bits), so with bf16/fp16 operands a fused multiply-add rounds as a
// multiply then an add does: "reference" on the CPU and "naive" on a GPU then give the same bits,
// which is how a mixed-precision run is compared bit for bit across devices. Bound by one
// multiply-add per loaded pair (no blocking): for tests and teaching, not for speed.

#include "core/parallel_for.h"
#include "kernels/gemm/gemm_builtin.h"
#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

namespace minitrain {

namespace {

template <typename T>
void gemm_reference_cpu(T* c, const T* a, bool ta, const T* b, bool tb, int64_t m, int64_t n,
                        int64_t k, T alpha, T beta) {
  parallel_for(m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < n; ++j) {
        T acc = 0;
        for (int64_t q = 0; q < k; ++q)
          acc += (ta ? a[q * m + i] : a[i * k + q]) * (tb ? b[j * k + q] : b[q * n + j]);
        T* p = c + i * n + j;
        *p = beta == T(0) ? alpha * acc : alpha * acc + beta * *p;  // gemm_ladder::store_c
      }
  });
}

}  // namespace

GemmBackend reference_gemm_backend() {
  GemmBackend g;
  g.name = "reference";
  g.device = DeviceType::CPU;
  g.technique =
      "one accumulator per C element summed over k in order, as the CUDA ladder's naive rung "
      "(bit-identical to it on 16-bit operands; memory-bound, for tests and teaching)";
  g.float32 = [](Device, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha,
                 float beta) { gemm_reference_cpu<float>(c, a, ta, b, tb, m, n, k, alpha, beta); };
  g.float64 = [](Device, double* c, const double* a, bool ta, const double* b, bool tb, int64_t m,
                 int64_t n, int64_t k, double alpha, double beta) {
    gemm_reference_cpu<double>(c, a, ta, b, tb, m, n, k, alpha, beta);
  };
  return g;
}

}  // namespace minitrain
