// CPUID/XGETBV feature reading and the measured peak FP32 rate (Note [peak FP32]).

#include "core/cpu_features.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "core/thread_policy.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace minitrain {
namespace {

#if defined(__x86_64__)
bool bit(unsigned reg, int b) { return (reg >> b) & 1u; }

uint64_t xgetbv0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t(hi) << 32) | lo;
}

CpuFeatures read_cpu_features() {
  CpuFeatures f;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return f;
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  f.vendor = vendor;

  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base_family = (a >> 8) & 0xf, base_model = (a >> 4) & 0xf;
  f.family = int(base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family);
  f.model = int(base_family == 0x6 || base_family == 0xf ? base_model | (((a >> 16) & 0xf) << 4)
                                                         : base_model);
  f.sse3 = bit(c, 0);
  const bool osxsave = bit(c, 27);
  // The OS must save a register file for its instructions to be usable (XCR0): YMM for AVX,
  // opmask + ZMM for AVX-512, the tile state for AMX.
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;
  f.avx = bit(c, 28) && os_ymm;
  f.fma = bit(c, 12) && os_ymm;

  if (max_leaf >= 7) {
    __cpuid_count(7, 0, a, b, c, d);
    f.avx2 = bit(b, 5) && os_ymm;
    f.avx512f = bit(b, 16) && os_zmm;
    f.avx512dq = bit(b, 17) && os_zmm;
    f.avx512cd = bit(b, 28) && os_zmm;
    f.avx512bw = bit(b, 30) && os_zmm;
    f.avx512vl = bit(b, 31) && os_zmm;
    f.amx_bf16 = bit(d, 22) && os_tiles;
    f.amx_tile = bit(d, 24) && os_tiles;
    unsigned a1 = 0, b1 = 0, c1 = 0, d1 = 0;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    f.avx512_bf16 = bit(a1, 5) && os_zmm;
  }

  __get_cpuid(0x80000000, &a, &b, &c, &d);
  if (a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned leaf = 0; leaf < 3; ++leaf) {
      unsigned r[4];
      __get_cpuid(0x80000002 + leaf, &r[0], &r[1], &r[2], &r[3]);
      std::memcpy(brand + 16 * leaf, r, 16);
    }
    std::string s = brand;
    s.erase(0, s.find_first_not_of(' '));
    f.model_name = s.substr(0, s.find_last_not_of(' ') + 1);
  }
  return f;
}

// One dependent add per cycle: the loop's own increment and branch run on other ports.
// The added value is a register, not an immediate: newer cores (Golden Cove) fold chains of
// immediate adds in the renamer and run several per cycle.
uint64_t add_chain(uint64_t iterations) {
  uint64_t x = 0, one = 1;
  for (uint64_t i = 0; i < iterations; ++i)
    __asm__ volatile(".rept 64\n\taddq %1, %0\n\t.endr" : "+r"(x) : "r"(one));
  return x;
}
constexpr int kAddsPerIteration = 64;

// kChains independent FMAs per iteration: more than latency (4-5 cycles) x units (2) in flight.
constexpr int kChains = 12;

__attribute__((target("avx512f"))) float fma_avx512(uint64_t iterations) {
  __m512 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm512_set1_ps(float(j));
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  for (uint64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 16  // every accumulator in a register of its own
    for (int j = 0; j < kChains; ++j) acc[j] = _mm512_fmadd_ps(acc[j], m, c);
  __m512 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm512_add_ps(s, acc[j]);
  float out[16];  // not _mm512_reduce_add_ps: GCC 12 warns inside it (-Wuninitialized)
  _mm512_storeu_ps(out, s);
  return out[0] + out[15];
}

__attribute__((target("avx2,fma"))) float fma_avx2(uint64_t iterations) {
  __m256 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm256_set1_ps(float(j));
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  for (uint64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 16  // every accumulator in a register of its own
    for (int j = 0; j < kChains; ++j) acc[j] = _mm256_fmadd_ps(acc[j], m, c);
  float out[8];
  __m256 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm256_add_ps(s, acc[j]);
  _mm256_storeu_ps(out, s);
  return out[0] + out[7];
}

// Without FMA, a multiply and an add (two flops, as one FMA) per lane.
float mul_add_sse(uint64_t iterations) {
  __m128 acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = _mm_set1_ps(float(j));
  const __m128 m = _mm_set1_ps(0.999999f), c = _mm_set1_ps(1e-6f);
  for (uint64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 16  // every accumulator in a register of its own
    for (int j = 0; j < kChains; ++j) acc[j] = _mm_add_ps(_mm_mul_ps(acc[j], m), c);
  float out[4];
  __m128 s = acc[0];
  for (int j = 1; j < kChains; ++j) s = _mm_add_ps(s, acc[j]);
  _mm_storeu_ps(out, s);
  return out[0] + out[3];
}

// The shortest of `repeats` timings of fn(iterations), in seconds: the least disturbed one.
template <typename Fn>
double best_seconds(Fn fn, uint64_t iterations, int repeats) {
  double best = 1e30;
  volatile double sink = 0;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    sink = sink + double(fn(iterations));
    const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    best = std::min(best, dt.count());
  }
  return best;
}

CpuPeak measure_peak(const CpuFeatures& f) {
  CpuPeak p;
  p.cores = available_cores();
  p.lanes = f.fp32_lanes();
  best_seconds(add_chain, 200000, 1);         // wake the core up to its working clock
  constexpr uint64_t kAddIterations = 20000;  // 1.28 M cycles, under a millisecond
  p.clock_ghz = double(kAddIterations) * kAddsPerIteration /
                best_seconds(add_chain, kAddIterations, 20) / 1e9;
  constexpr uint64_t kFmaIterations = 100000;  // 1.2 M FMAs, well under a millisecond
  const double fma_s = f.avx512f && f.fma ? best_seconds(fma_avx512, kFmaIterations, 20)
                       : f.avx2 && f.fma  ? best_seconds(fma_avx2, kFmaIterations, 20)
                                          : best_seconds(mul_add_sse, kFmaIterations, 20);
  const double add_clock_ghz = double(kAddIterations) * kAddsPerIteration /
                               best_seconds(add_chain, kAddIterations, 20) / 1e9;
  const double fma_per_ns = double(kFmaIterations) * kChains / fma_s / 1e9;
  p.fma_per_cycle = fma_per_ns / add_clock_ghz;
  p.fma_units = std::max(1, int(std::lround(p.fma_per_cycle)));
  // The clock the FMA units ran at (AVX-512 can run below the scalar clock): their measured rate
  // over their count. The add chain only tells how many units there are.
  p.clock_ghz = fma_per_ns / p.fma_units;
  return p;
}
#else
CpuFeatures read_cpu_features() { return {}; }
CpuPeak measure_peak(const CpuFeatures&) {
  CpuPeak p;
  p.cores = available_cores();
  return p;  // clock 0: unknown off x86-64
}
#endif

}  // namespace

int CpuFeatures::fp32_lanes() const {
  if (avx512f && fma) return 16;
  if (avx2 && fma) return 8;
  return 4;
}

std::string CpuFeatures::list() const {
  std::string s;
  const std::pair<bool, const char*> all[] = {{sse3, "sse3"},         {avx, "avx"},
                                              {avx2, "avx2"},         {fma, "fma"},
                                              {avx512f, "avx512f"},   {avx512dq, "avx512dq"},
                                              {avx512cd, "avx512cd"}, {avx512bw, "avx512bw"},
                                              {avx512vl, "avx512vl"}, {avx512_bf16, "avx512_bf16"},
                                              {amx_tile, "amx_tile"}, {amx_bf16, "amx_bf16"}};
  for (const auto& [present, name] : all)
    if (present) s += (s.empty() ? "" : " ") + std::string(name);
  return s.empty() ? "none known" : s;
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = read_cpu_features();
  return f;
}

std::string CpuPeak::describe() const {
  if (clock_ghz <= 0) return "unknown (no clock measurement on this architecture)";
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%.1f GFLOP/s = %d cores x %d FMA units x %d lanes x 2 x %.2f GHz (measured: "
                "%.2f FMA/cycle)",
                gflops(), cores, fma_units, lanes, clock_ghz, fma_per_cycle);
  return buf;
}

const CpuPeak& cpu_peak_fp32() {
  static const CpuPeak p = measure_peak(cpu_features());
  return p;
}

}  // namespace minitrain
