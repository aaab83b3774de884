// The CPU's reference GEMM: one float accumulator per C element, summed over k in order, then
// the ladder's own store (gemm_ladder/gemm_tiling.h store_c), which is exactly what the CUDA
// ladder's naive rung computes per element. Products of 16-bit values are exact in float32 (8 x 8
// and 11 x 11 significant bits), so with bf16/fp16 operands a fused multiply-add rounds as a
// multiply then an add does: "reference" on the CPU and "naive" on a GPU then give the same bits,
// which is how a mixed-precision run is compared bit for bit across devices. Bound by one
// multiply-add per loaded pair (no blocking): for tests and teaching, not for speed.

#include "core/parallel_for.h"
#include "kernels/gemm/gemm_builtin.h"
#include "kernels/gemm/gemm_ladder/gemm_mixed.h"

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

// The same loop on mixed precision's operands (issue 35): each element read widened and C stored
// rounded by gemm_mixed.h, as the CUDA warptile kernel's mixed variant does; the sums are the
// float32 loop's, so the bits are those of widened copies, the float32 loop and a cast.
void gemm_reference_mixed_cpu(const GemmMixedCall& call) {
  using namespace gemm_ladder;
  auto elem = [](DType t) {
    return t == DType::BFloat16  ? Elem::BFloat16
           : t == DType::Float16 ? Elem::Float16
                                 : Elem::Float32;
  };
  GemmMixedArgs g{};
  g.c = call.c;
  g.c_elem = elem(call.c_dtype);
  g.a = mixed_operand_a(call.a, elem(call.a_dtype), call.trans_a, call.m, call.k);
  g.b = mixed_operand_b(call.b, elem(call.b_dtype), call.trans_b, call.k, call.n);
  g.bias = call.bias;
  g.m = call.m, g.n = call.n, g.k = call.k;
  g.alpha = call.alpha, g.beta = call.beta;
  parallel_for(g.m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      for (int64_t j = 0; j < g.n; ++j) {
        float acc = 0;
        for (int64_t q = 0; q < g.k; ++q) acc += g.a.at(i, q) * g.b.at(q, j);
        store_c_mixed(g, i, j, acc);
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
  g.mixed = [](Device, const GemmMixedCall& call) { gemm_reference_mixed_cpu(call); };
  g.mixed_bias = true;
  return g;
}

}  // namespace minitrain
