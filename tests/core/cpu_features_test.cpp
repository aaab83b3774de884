// The CPU's features as CPUID reports them, checked against the kernel's own reading
// (/proc/cpuinfo), and the measured peak FP32 rate's arithmetic and plausibility.

#include "core/cpu_features.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "core/thread_policy.h"

namespace minitrain {
namespace {

// The "flags" of the first processor in /proc/cpuinfo (the kernel's view; it also hides what
// the OS does not enable). Empty where there is no such file or line.
std::set<std::string> kernel_cpu_flags() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::set<std::string> flags;
    for (std::string w; words >> w;) flags.insert(w);
    return flags;
  }
  return {};
}

TEST(CpuFeatures, AgreeWithTheKernelsFlags) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "CPUID is read on x86-64 only";
#endif
  const std::set<std::string> flags = kernel_cpu_flags();
  if (flags.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.sse3, flags.count("pni") == 1);  // the kernel's name for SSE3
  EXPECT_EQ(f.avx, flags.count("avx") == 1);
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
  EXPECT_EQ(f.avx512dq, flags.count("avx512dq") == 1);
  EXPECT_EQ(f.avx512cd, flags.count("avx512cd") == 1);
  EXPECT_EQ(f.avx512_bf16, flags.count("avx512_bf16") == 1);
  EXPECT_EQ(f.amx_tile, flags.count("amx_tile") == 1);
  EXPECT_FALSE(f.vendor.empty());
}

TEST(CpuFeatures, LanesFollowTheWidestFma) {
  CpuFeatures f;
  EXPECT_EQ(f.fp32_lanes(), 4);
  EXPECT_EQ(f.list(), "none known");
  f.sse3 = f.avx = f.avx2 = true;
  EXPECT_EQ(f.fp32_lanes(), 4) << "AVX2 without FMA: no fused 8-lane multiply-add";
  f.fma = true;
  EXPECT_EQ(f.fp32_lanes(), 8);
  f.avx512f = true;
  EXPECT_EQ(f.fp32_lanes(), 16);
  EXPECT_FALSE(f.avx512_skylake()) << "F alone is not Skylake-SP's set";
  f.avx512cd = f.avx512bw = f.avx512dq = f.avx512vl = true;
  EXPECT_TRUE(f.avx512_skylake());
  EXPECT_EQ(f.list(), "sse3 avx avx2 fma avx512f avx512dq avx512cd avx512bw avx512vl");
}

TEST(CpuPeak, IsTheProductOfItsMeasuredFactors) {
  const CpuPeak& p = cpu_peak_fp32();
  EXPECT_EQ(&p, &cpu_peak_fp32()) << "measured once per process";
  EXPECT_EQ(p.cores, available_cores());
  EXPECT_EQ(p.lanes, cpu_features().fp32_lanes());
  EXPECT_DOUBLE_EQ(p.gflops(), p.cores * p.fma_units * p.lanes * 2.0 * p.clock_ghz);
#if defined(__x86_64__)
  // Wide bounds: a loaded machine measures low, but no x86-64 core runs its adds below 0.2 or
  // above 7 GHz, or retires more than 4 FMAs per cycle (two is the most any ships with).
  EXPECT_GT(p.clock_ghz, 0.2);
  EXPECT_LT(p.clock_ghz, 7.0);
  EXPECT_GE(p.fma_units, 1);
  EXPECT_LE(p.fma_per_cycle, 4.0);
  EXPECT_NE(p.describe().find("GFLOP/s"), std::string::npos) << p.describe();
#endif
}

}  // namespace
}  // namespace minitrain
