#pragma once
// Run-time CPU features for the loops compiled twice, for the baseline x86-64 the build targets
// and for AVX2 (Note [AVX2 clones] in kernels/optim/optimizer_step.cpp). MINITRAIN_X86_CLONES is 1
// where the compiler can build a clone (GCC or Clang on x86-64, host code); elsewhere the baseline
// loop runs.

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDA_ARCH__)
#define MINITRAIN_X86_CLONES 1
#else
#define MINITRAIN_X86_CLONES 0
#endif

namespace minitrain {

#if MINITRAIN_X86_CLONES
/// Whether this CPU runs AVX2 (asked once).
inline bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif

}  // namespace minitrain
