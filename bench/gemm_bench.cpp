// GEMM through every registered backend of one device (kernels/gemm/gemm_registry.h), float32:
//   GPU: cublas, cublas_tf32, cublas_bf16, cublaslt and the hand-written ladder
//   (kernels/gemm/gemm_ladder/), CPU: openblas (minitrain's default) and eigen.
// Shapes: squares 128..8192 (the CPU stops at 2048: beyond it a run takes minutes on a few cores),
// and the three GEMMs of a Linear layer at the trainer's MLP shapes, batch 64 and 256 x widths
// 64..1024: forward y = x W^T, backward dx = dy W and dW = dy^T x.
//
// Counters: GFLOP/s (2mnk per GEMM) and pct_of_ref, this backend's speed as a percentage of the
// reference measured in the same run for the same shape: cuBLAS FP32 on the GPU, and for the
// ladder's tensor-core rungs cuBLAS on the same tensor-core format (tc_tf32 against cublas_tf32,
// tc_bf16 against cublas_bf16: float32 in and out, inputs rounded alike); OpenBLAS on the CPU. The
// reference runs first for each shape; when a filter leaves it out, it is timed inline before the
// backend. GPU times are CUDA events after warm-up with L2 flushed
// (kernels/op_bench/device_timer.h, manual time); CPU times are Google Benchmark's real-time loop.
//
//   minitrain_gemm_bench [--device=auto|cpu|cuda] [--threads=N] [--benchmark_filter=mlp]
//                        [--benchmark_format=json]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "bench/bench_main.h"
#include "bench/bench_inputs.h"
#include "bench/bench_device.h"
#include "bench/bench_threads.h"
#include "kernels/op_bench/device_timer.h"
#include "core/device.h"
#include "core/error.h"
#include "kernels/gemm/gemm_registry.h"

namespace {

using minitrain::Device;
using minitrain::GemmBackend;
using minitrain::Shape;
using minitrain::Tensor;

struct Case {
  std::string name;  // "square_1024", "mlp_b256_w512_fwd_xWt", ...
  int64_t m, n, k;
  bool trans_a, trans_b;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

std::vector<Case> cases(bool gpu) {
  std::vector<Case> out;
  for (int64_t s = 128; s <= (gpu ? 8192 : 2048); s *= 2)
    out.push_back({"square_" + std::to_string(s), s, s, s, false, false});
  for (int64_t batch : {64, 256})
    for (int64_t w : {64, 128, 256, 512, 1024}) {
      const std::string p = "mlp_b" + std::to_string(batch) + "_w" + std::to_string(w);
      out.push_back({p + "_fwd_xWt", batch, w, w, false, true});   // y[b,out] = x[b,in] W[out,in]^T
      out.push_back({p + "_bwd_dyW", batch, w, w, false, false});  // dx[b,in] = dy[b,out] W[out,in]
      out.push_back({p + "_bwd_dytx", w, w, batch, true, false});  // dW[out,in] = dy^T x
    }
  return out;
}

struct Operands {
  Tensor a, b, c;
};

Operands make_operands(const Case& g, Device device) {
  using minitrain::bench::filled;
  return {(g.trans_a ? filled(g.k, g.m, 1) : filled(g.m, g.k, 1)).to(device),
          (g.trans_b ? filled(g.n, g.k, 2) : filled(g.k, g.n, 2)).to(device),
          Tensor::zeros(Shape{g.m, g.n}, minitrain::DType::Float32, device)};
}

// Seconds per GEMM of each reference backend, by shape, from this run.
std::map<std::string, double>& reference_seconds() {
  static std::map<std::string, double> table;
  return table;
}
std::string ref_key(const std::string& backend, const Case& g) { return backend + "/" + g.name; }

// Mean seconds per call of `backend` on `g`, timed as the benchmarks time it: per call with
// events on a GPU, the whole loop with the host clock on the CPU.
double time_backend(const std::string& backend, const Case& g, Device device, Operands& o,
                    int runs) {
  return minitrain::bench::mean_call_seconds(
      device, [&] { minitrain::gemm_with(backend, o.c, o.a, g.trans_a, o.b, g.trans_b); }, runs);
}

void run(benchmark::State& state, const GemmBackend& backend, const std::string& reference,
         const Case& g, Device device) {
  Operands o = make_operands(g, device);
  double seconds = 0;
  try {
    if (device.is_cuda()) {
      minitrain::bench::DeviceTimer timer(device);
      for (auto _ : state) {
        const double s = timer.time_seconds(
            [&] { minitrain::gemm_with(backend.name, o.c, o.a, g.trans_a, o.b, g.trans_b); });
        state.SetIterationTime(s);
        seconds += s;
      }
    } else {
      minitrain::gemm_with(backend.name, o.c, o.a, g.trans_a, o.b,
                           g.trans_b);  // warm-up: pack buffers, pool
      const auto t0 = std::chrono::steady_clock::now();
      for (auto _ : state) {
        minitrain::gemm_with(backend.name, o.c, o.a, g.trans_a, o.b, g.trans_b);
        benchmark::DoNotOptimize(o.c.raw_data());
        benchmark::ClobberMemory();
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
  } catch (const minitrain::Error& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double per_call = seconds / double(state.iterations());
  state.counters["GFLOP/s"] =
      benchmark::Counter(g.flops() * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  double& ref = reference_seconds()[ref_key(reference, g)];
  if (backend.name == reference) ref = per_call;
  if (ref == 0) ref = time_backend(reference, g, device, o, 10);  // the reference was filtered out
  state.counters["pct_of_ref"] = 100.0 * ref / per_call;
  state.SetLabel("ref " + reference);
}

// The reference a backend is measured against: a tensor-core rung "tc_<format>" against cuBLAS
// on the same format ("cublas_<format>") where cuBLAS is linked; everything else against fp32_ref.
std::string reference_for(const GemmBackend& backend, const std::string& fp32_ref) {
  if (!backend.reduced_precision_inputs || backend.name.rfind("tc_", 0) != 0) return fp32_ref;
  const std::string same_format = "cublas_" + backend.name.substr(3);
  return minitrain::has_gemm_backend(same_format) ? same_format : fp32_ref;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Device device = minitrain::bench::take_device_flag(argc, argv);
    const int threads = minitrain::bench::take_threads_flag(argc, argv, minitrain::num_threads());
    minitrain::bench::add_device_context(device, threads);

    const std::vector<std::string> names = minitrain::gemm_backend_names(device.type());
    const std::string fp32_ref = device.is_cuda() ? "cublas" : "openblas";
    // Per shape: the references first, so that every later backend finds them measured.
    std::vector<std::string> order;
    for (const std::string& r : {fp32_ref, std::string("cublas_tf32"), std::string("cublas_bf16")})
      if (minitrain::has_gemm_backend(r) && minitrain::gemm_backend(r).device == device.type())
        order.push_back(r);
    const std::size_t references = order.size();
    for (const std::string& n : names)
      if (std::find(order.begin(), order.begin() + references, n) == order.begin() + references)
        order.push_back(n);

    for (const Case& g : cases(device.is_cuda()))
      for (const std::string& name : order) {
        const GemmBackend& backend = minitrain::gemm_backend(name);
        const std::string reference = reference_for(backend, fp32_ref);
        auto* b =
            benchmark::RegisterBenchmark(("gemm/" + g.name + "/" + name).c_str(),
                                         [&backend, reference, g, device](benchmark::State& s) {
                                           run(s, backend, reference, g, device);
                                         });
        b->Unit(benchmark::kMicrosecond);
        if (device.is_cuda())
          b->UseManualTime();
        else
          b->UseRealTime();
      }

    return minitrain::bench::run_benchmarks(argc, argv);
  } catch (const minitrain::Error& e) {
    std::fprintf(stderr, "minitrain_gemm_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
