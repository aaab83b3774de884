// Choosing OpenBLAS's kernels from the CPU's features (Note [OpenBLAS core]): the choice for
// simulated CPUs (this project's VM masks its model, family 6 model 207, which OpenBLAS 0.3.21
// does not know and runs as Prescott), and the choice made on this machine.

#include "kernels/gemm/openblas_core.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace minitrain {
namespace {

CpuFeatures sse_only() {
  CpuFeatures f;
  f.vendor = "GenuineIntel";
  f.sse3 = true;
  return f;
}
CpuFeatures avx2_fma() {
  CpuFeatures f = sse_only();
  f.avx = f.avx2 = f.fma = true;
  return f;
}
CpuFeatures skylake_sp() {
  CpuFeatures f = avx2_fma();
  f.avx512f = f.avx512cd = f.avx512bw = f.avx512dq = f.avx512vl = true;
  return f;
}
// What this project's cloud VM reports: a masked brand string and a model OpenBLAS 0.3.21 lacks,
// with AVX-512, BF16 and AMX.
CpuFeatures masked_xeon_vm() {
  CpuFeatures f = skylake_sp();
  f.model_name = "Intel(R) Xeon(R) Processor";
  f.family = 6;
  f.model = 207;
  f.avx512_bf16 = f.amx_tile = f.amx_bf16 = true;
  return f;
}

TEST(OpenBlasCore, ChosenFromFeaturesNotTheModel) {
  EXPECT_EQ(openblas_core_for(masked_xeon_vm()), "Cooperlake");
  EXPECT_EQ(openblas_core_for(skylake_sp()), "SkylakeX");
  EXPECT_EQ(openblas_core_for(avx2_fma()), "Haswell");
  CpuFeatures avx_only = sse_only();
  avx_only.avx = true;
  EXPECT_EQ(openblas_core_for(avx_only), "Sandybridge");
  EXPECT_EQ(openblas_core_for(sse_only()), "") << "nothing to choose over OpenBLAS's own pick";
  CpuFeatures partial = avx2_fma();
  partial.avx512f = true;  // F without BW/VL/DQ (Knights Landing): SkylakeX's kernels would fault
  EXPECT_EQ(openblas_core_for(partial), "Haswell");
}

TEST(OpenBlasCore, AnAvx512CpuNeverRunsPrescott) {
  EXPECT_LT(openblas_core_level("Prescott"), openblas_core_level(openblas_core_for(skylake_sp())));
  EXPECT_LT(openblas_core_level("Prescott"),
            openblas_core_level(openblas_core_for(masked_xeon_vm())));
  EXPECT_EQ(openblas_core_level("prescott"), 1) << "OpenBLAS compares names without case";
  EXPECT_EQ(openblas_core_level("Haswell"), 3);
  EXPECT_EQ(openblas_core_level("SkylakeX"), 4);
  EXPECT_EQ(openblas_core_level("NoSuchCore"), 0);
}

TEST(OpenBlasCore, ThisMachineRunsTheKernelsItsFeaturesAllow) {
  const OpenBlasSelection& s = select_openblas_core();
  EXPECT_EQ(&s, &select_openblas_core()) << "selected once per process";
  EXPECT_EQ(s.core, openblas_core());
  const char* user = std::getenv("OPENBLAS_CORETYPE");
  if (user != nullptr && *user != '\0') {
    EXPECT_NE(s.reason.find("set by the user"), std::string::npos) << s.reason;
    EXPECT_EQ(s.found, s.core) << "the user's core is kept";
    return;
  }
  EXPECT_EQ(std::getenv("OPENBLAS_CORETYPE"), nullptr) << "the selection leaves no variable set";
  const std::string want = openblas_core_for(cpu_features());
  if (want.empty() || openblas_core_level(s.found) == 0) {
    EXPECT_EQ(s.core, s.found) << s.reason;
    return;
  }
  ASSERT_TRUE(s.dynamic) << "Debian's OpenBLAS is a DYNAMIC_ARCH build: " << s.config;
  EXPECT_GE(openblas_core_level(s.core), openblas_core_level(want))
      << "runs " << s.core << " on a CPU with " << cpu_features().list() << " (" << s.reason << ")";
}

// After the switch every GEMM still gives the right sums: small integers, exact in float32.
TEST(OpenBlasCore, GemmsAreExactAfterTheSelection) {
  select_openblas_core();
  for (int64_t m : {1, 17, 129})
    for (int64_t k : {1, 33, 300}) {
      const int64_t n = 65;
      Tensor a = Tensor::empty({m, k}, DType::Float32), b = Tensor::empty({k, n}, DType::Float32);
      for (int64_t i = 0; i < m * k; ++i) a.data<float>()[i] = float(i % 7 - 3);
      for (int64_t i = 0; i < k * n; ++i) b.data<float>()[i] = float(i % 5 - 2);
      Tensor c = Tensor::empty({m, n}, DType::Float32);
      gemm(c, a, false, b, false);
      bool any_nonzero = false;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t col = 0; col < n; ++col) {
          float want = 0;
          for (int64_t i = 0; i < k; ++i)
            want += a.data<float>()[r * k + i] * b.data<float>()[i * n + col];
          ASSERT_EQ(c.data<float>()[r * n + col], want) << m << "x" << n << "x" << k;
          any_nonzero = any_nonzero || want != 0;
        }
      EXPECT_TRUE(any_nonzero);
    }
}

}  // namespace
}  // namespace minitrain
