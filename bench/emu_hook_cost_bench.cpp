// What the emulated GPU's memory checkers cost a kernel (docs/emulator_counters.md, "What the
// checkers cost"). Emulated kernels keep AddressSanitizer's inline shadow check and recover into
// the emulator only where a checker routed the memory (Note [accesses routed to the checkers],
// cuda_emu/src/routed_memory.h). Here the same kernel sources are compiled four times
// (bench/CMakeLists.txt) and run on the same emulated GPU, alternating in every iteration so that
// each variant sees the same machine:
//   unchecked     no sanitizer: the emulator's own cost (fibers, barriers, launch)
//   inline_check  AddressSanitizer's inline shadow check, without recovery: the build before the
//                 counters
//   call_hook     a call per access (--param asan-instrumentation-with-call-threshold=0): how the
//                 counters saw accesses before the routing (the call went to the emulator's hook)
//   routed        as every emulated kernel is built now; with the checkers off (MINITRAIN_EMU_*
//                 unset) and on (mtemu::counters_collect(true))
// Kernels: a coalesced float copy (bench/emu_hook_cost_copy.cu) and the GEMM ladder's rungs 02
// (coalesced: global loads only) and 03 (smem_tiled: shared memory and barriers), their own files.
// The reported (manual) time is the routed kernel's with the checkers off. Counters, per launch:
//   unchecked_ms, inline_ms, call_ms, off_ms, on_ms
//   off_pct_of_inline   100 x off / inline: what the routing costs with checkers off (100 = none)
//   call_pct_of_inline  100 x call / inline: what a call per access cost
//   on_x_off            on / off: the cost of counting
//   inline_pct_of_unchecked  100 x inline / unchecked: what ASan's checks cost the emulator
//
//   minitrain_emu_hook_cost_bench [--benchmark_repetitions=3] [--benchmark_filter=copy]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "core/device.h"
#include "core/error.h"
#include "core/stream.h"
#include "core/tensor.h"
#include "cuda_emu/counters.h"
#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

struct CUstream_st;

namespace mtbench_emu {
#define MT_EMU_BENCH_DECLARE(variant)                                       \
  namespace variant {                                                       \
  void copy_cuda(float* y, const float* x, int64_t n, CUstream_st* stream); \
  }
MT_EMU_BENCH_DECLARE(routed)
MT_EMU_BENCH_DECLARE(call_hook)
MT_EMU_BENCH_DECLARE(inline_check)
MT_EMU_BENCH_DECLARE(unchecked)
#undef MT_EMU_BENCH_DECLARE
}  // namespace mtbench_emu

namespace minitrain::gemm_ladder {
#define MT_EMU_BENCH_DECLARE(variant)                                         \
  void gemm_coalesced_cuda_##variant(const GemmArgs& g, CUstream_st* stream); \
  void gemm_smem_tiled_cuda_##variant(const GemmArgs& g, CUstream_st* stream);
MT_EMU_BENCH_DECLARE(routed)
MT_EMU_BENCH_DECLARE(call_hook)
MT_EMU_BENCH_DECLARE(inline_check)
MT_EMU_BENCH_DECLARE(unchecked)
#undef MT_EMU_BENCH_DECLARE
}  // namespace minitrain::gemm_ladder

namespace {

using minitrain::Device;
using minitrain::DType;
using minitrain::Shape;
using minitrain::Tensor;
using Clock = std::chrono::steady_clock;
namespace ladder = minitrain::gemm_ladder;

enum Variant { kUnchecked, kInline, kCall, kRoutedOff, kRoutedOn, kVariants };
// The builds, in Variant's order (the routed build runs as kRoutedOff and kRoutedOn).
constexpr std::size_t kBuilds = 4;

// One kernel's four builds, launched on `stream`; `size` picks the problem.
struct Kernel {
  virtual ~Kernel() = default;
  virtual void run(std::size_t build, CUstream_st* stream) = 0;
};

struct Copy : Kernel {
  Tensor x, y;
  int64_t n;
  Copy(int64_t n_, Device d)
      : x(Tensor::zeros(Shape{n_}, DType::Float32, d)),
        y(Tensor::zeros(Shape{n_}, DType::Float32, d)),
        n(n_) {}
  void run(std::size_t build, CUstream_st* s) override {
    using Fn = void (*)(float*, const float*, int64_t, CUstream_st*);
    static constexpr std::array<Fn, kBuilds> fns = {
        &mtbench_emu::unchecked::copy_cuda, &mtbench_emu::inline_check::copy_cuda,
        &mtbench_emu::call_hook::copy_cuda, &mtbench_emu::routed::copy_cuda};
    fns[build](y.data<float>(), x.data<float>(), n, s);
  }
};

struct Rung : Kernel {
  using Fn = void (*)(const ladder::GemmArgs&, CUstream_st*);
  Tensor a, b, c;
  ladder::GemmArgs g{};
  std::array<Fn, kBuilds> fns;
  Rung(int64_t size, Device d, std::array<Fn, kBuilds> f)
      : a(Tensor::zeros(Shape{size, size}, DType::Float32, d)),
        b(Tensor::zeros(Shape{size, size}, DType::Float32, d)),
        c(Tensor::zeros(Shape{size, size}, DType::Float32, d)),
        fns(f) {
    g.c = c.data<float>();
    g.a = ladder::operand_a(a.data<float>(), false, size, size);
    g.b = ladder::operand_b(b.data<float>(), false, size, size);
    g.m = g.n = g.k = size;
    g.alpha = 1.f, g.beta = 0.f;
  }
  void run(std::size_t build, CUstream_st* s) override { fns[build](g, s); }
};

// Seconds for one launch of `variant`, the device drained.
double time_one(Kernel& k, int variant, Device d) {
  const bool counting = variant == kRoutedOn;
  if (counting) mtemu::counters_collect(true);
  const auto start = Clock::now();
  k.run(std::min(std::size_t(variant), kBuilds - 1), minitrain::current_stream(d).native_handle());
  minitrain::synchronize(d);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  if (counting) {
    mtemu::counters_collect(false);
    benchmark::DoNotOptimize(mtemu::counters_take());
  }
  return s;
}

void hook_cost(benchmark::State& state, Kernel* kernel, Device d) {
  std::array<double, kVariants> total{};
  for (int v = 0; v < kVariants; ++v) time_one(*kernel, v, d);  // warm-up: first-touch, caches
  int64_t rotation = 0;
  for (auto _ : state) {
    // Each iteration runs every variant once, starting from a different one each time, so no
    // variant always follows the same neighbour.
    double off = 0;
    for (int i = 0; i < kVariants; ++i) {
      const int v = int((rotation + i) % kVariants);
      const double s = time_one(*kernel, v, d);
      total[std::size_t(v)] += s;
      if (v == kRoutedOff) off = s;
    }
    ++rotation;
    state.SetIterationTime(off);
  }
  const double n = double(state.iterations());
  state.counters["unchecked_ms"] = total[kUnchecked] / n * 1e3;
  state.counters["inline_ms"] = total[kInline] / n * 1e3;
  state.counters["call_ms"] = total[kCall] / n * 1e3;
  state.counters["off_ms"] = total[kRoutedOff] / n * 1e3;
  state.counters["on_ms"] = total[kRoutedOn] / n * 1e3;
  state.counters["off_pct_of_inline"] = 100.0 * total[kRoutedOff] / total[kInline];
  state.counters["call_pct_of_inline"] = 100.0 * total[kCall] / total[kInline];
  state.counters["on_x_off"] = total[kRoutedOn] / total[kRoutedOff];
  state.counters["inline_pct_of_unchecked"] = 100.0 * total[kInline] / total[kUnchecked];
}

}  // namespace

int main(int argc, char** argv) {
  MT_CHECK_AS(
      minitrain::DeviceError, minitrain::cuda_device_count() > 0,
      "minitrain_emu_hook_cost_bench: no emulated GPU: ", minitrain::cuda_unavailable_reason());
  const Device d = Device::cuda(0);
  benchmark::AddCustomContext("device", "emulated GPU (cuda_emu), ASan build");
  // The kernels outlive the run (Google Benchmark calls the registered functions later, in
  // run_benchmarks).
  std::vector<std::unique_ptr<Kernel>> kernels;
  for (const int64_t n : {4096, 65536, 1 << 20}) {
    kernels.push_back(std::make_unique<Copy>(n, d));
    benchmark::RegisterBenchmark(("hook_cost/copy/" + std::to_string(n)).c_str(), hook_cost,
                                 kernels.back().get(), d)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  const std::array<Rung::Fn, kBuilds> coalesced = {
      &ladder::gemm_coalesced_cuda_unchecked, &ladder::gemm_coalesced_cuda_inline_check,
      &ladder::gemm_coalesced_cuda_call_hook, &ladder::gemm_coalesced_cuda_routed};
  const std::array<Rung::Fn, kBuilds> smem_tiled = {
      &ladder::gemm_smem_tiled_cuda_unchecked, &ladder::gemm_smem_tiled_cuda_inline_check,
      &ladder::gemm_smem_tiled_cuda_call_hook, &ladder::gemm_smem_tiled_cuda_routed};
  for (const int64_t size : {32, 64, 128}) {
    for (const auto& [name, fns] :
         {std::make_pair("coalesced", coalesced), std::make_pair("smem_tiled", smem_tiled)}) {
      kernels.push_back(std::make_unique<Rung>(size, d, fns));
      benchmark::RegisterBenchmark(
          ("hook_cost/" + std::string(name) + "/" + std::to_string(size)).c_str(), hook_cost,
          kernels.back().get(), d)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  return minitrain::bench::run_benchmarks(argc, argv);
}
