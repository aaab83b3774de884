// Memory-bound kernels: GB/s (bytes read + written per call / time) for copy, the elementwise ops,
// activations, reductions, fused MSE forward+backward, fused bias + activation and the fused Adam
// step, with the counter pct_of_copy: the kernel's GB/s over a plain copy's GB/s (cudaMemcpyAsync
// device to device on a GPU, std::memcpy in chunks over the CPU threads on the CPU) of the same
// tensor size, measured in the same run. A memory-bound kernel near 100% moves bytes as fast as the
// memory system allows. Sizes are bytes of one float32 operand, 4 KiB .. 1 GiB on a GPU, 4 KiB ..
// 256 MiB on the CPU. GPU times are CUDA events after warm-up with L2 flushed before each timed run
// (bench/gpu_timing.h); small sizes are bound by launch latency, not bandwidth.
// Unfused compositions (mse_forward_then_backward, bias_add_then_gelu) count the fused kernel's
// bytes, so their lower GB/s is what fusing saves. In CUDA builds on a GPU, cuDNN's activation
// forward/backward (cudnn_relu_*, cudnn_tanh_*) are the vendor baseline for the activation rows.
//
//   minitrain_memory_bench [--device=cpu|cuda] [--threads=N] [--benchmark_filter=adam]

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench_device.h"
#include "bench/bench_threads.h"
#include "bench/gpu_timing.h"
#include "core/device.h"
#include "core/parallel_for.h"
#include "core/strings.h"
#include "core/tensor.h"
#include "kernels/activation.h"
#include "kernels/adam_step.h"
#include "kernels/bias_activation.h"
#include "kernels/bias_add.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"
#include "kernels/mse_loss.h"
#include "kernels/reduce.h"
#if MINITRAIN_WITH_CUDA
#include "kernels/cudnn_activation.h"
#endif

namespace {

using minitrain::Activation;
using minitrain::Device;
using minitrain::DType;
using minitrain::Tensor;
using minitrain::bench::DeviceTimer;

constexpr int64_t kCols = 1024;  // matrix ops ([rows, 1024]: a Linear layer of width 1024)

Tensor filled(int64_t n, double value, Device d) {
  Tensor t = Tensor::empty({n}, DType::Float32, d);
  minitrain::fill(t, value);
  return t;
}

// The reference: seconds per copy of n floats, measured once per (device, n) in this process.
double copy_seconds(Device d, int64_t n) {
  static std::map<std::pair<int, int64_t>, double> cache;
  const auto key = std::make_pair(d.is_cuda() ? d.index() : -1, n);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Tensor src = filled(n, 1.0, d), dst = filled(n, 0.0, d);
  DeviceTimer timer(d);
  auto work = [&] {
    if (d.is_cuda())
      dst.copy_(src);  // cudaMemcpyAsync on the current stream
    else  // memcpy in chunks over minitrain's CPU threads: the roof for kernels that use them all
      minitrain::parallel_for(n, int64_t(1) << 16, [&](int64_t begin, int64_t end) {
        std::memcpy(dst.data<float>() + begin, src.data<float>() + begin,
                    static_cast<std::size_t>(end - begin) * 4);
      });
  };
  // Enough repetitions for about 20 ms of copying, at least 5; the mean over them.
  const int reps = static_cast<int>(std::clamp<int64_t>((int64_t(1) << 30) / (n * 8), 5, 2000));
  double total = 0;
  for (int r = 0; r < reps; ++r) total += timer.time_seconds(work);
  return cache[key] = total / reps;
}

struct Op {
  std::string name;
  int64_t operands;  // float32 operands read + written per element
  // Makes the inputs for n elements and returns the work to time.
  std::function<std::function<void()>(int64_t n, Device d)> make;
};

std::vector<Op> ops() {
  using namespace minitrain;
  std::vector<Op> v;
  v.push_back({"copy", 2, [](int64_t n, Device d) {
                 auto src = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto dst = std::make_shared<Tensor>(filled(n, 0.0, d));
                 return std::function<void()>([=] { dst->copy_(*src); });
               }});
  v.push_back({"add", 3, [](int64_t n, Device d) {
                 auto a = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto b = std::make_shared<Tensor>(filled(n, 2.0, d));
                 auto o = std::make_shared<Tensor>(filled(n, 0.0, d));
                 return std::function<void()>([=] { add(*o, *a, *b); });
               }});
  v.push_back({"scale", 2, [](int64_t n, Device d) {
                 auto a = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto o = std::make_shared<Tensor>(filled(n, 0.0, d));
                 return std::function<void()>([=] { scale(*o, *a, 0.5); });
               }});
  v.push_back({"axpy", 3, [](int64_t n, Device d) {
                 auto x = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto y = std::make_shared<Tensor>(filled(n, 0.0, d));
                 return std::function<void()>([=] { axpy(*y, 1e-3, *x); });
               }});
  for (Activation a : {Activation::ReLU, Activation::GELU}) {
    v.push_back({std::string(activation_name(a)) + "_forward", 2, [a](int64_t n, Device d) {
                   auto x = std::make_shared<Tensor>(filled(n, 0.3, d));
                   auto y = std::make_shared<Tensor>(filled(n, 0.0, d));
                   return std::function<void()>([=] { activation_forward(*y, *x, a); });
                 }});
    v.push_back({std::string(activation_name(a)) + "_backward", 3, [a](int64_t n, Device d) {
                   auto x = std::make_shared<Tensor>(filled(n, 0.3, d));
                   auto g = std::make_shared<Tensor>(filled(n, 1.0, d));
                   auto o = std::make_shared<Tensor>(filled(n, 0.0, d));
                   return std::function<void()>([=] { activation_backward(*o, *g, *x, a); });
                 }});
  }
  v.push_back({"tanh_forward", 2, [](int64_t n, Device d) {
                 auto x = std::make_shared<Tensor>(filled(n, 0.3, d));
                 auto y = std::make_shared<Tensor>(filled(n, 0.0, d));
                 return std::function<void()>(
                     [=] { activation_forward(*y, *x, Activation::Tanh); });
               }});
  v.push_back({"sum", 1, [](int64_t n, Device d) {
                 auto x = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto o = std::make_shared<Tensor>(Tensor::empty({}, DType::Float32, d));
                 return std::function<void()>([=] { sum(*o, *x); });
               }});
  v.push_back({"squared_norm", 1, [](int64_t n, Device d) {
                 auto x = std::make_shared<Tensor>(filled(n, 1.0, d));
                 auto o = std::make_shared<Tensor>(Tensor::empty({}, DType::Float32, d));
                 return std::function<void()>([=] { squared_norm(*o, *x); });
               }});
  v.push_back({"sum_rows", 1, [](int64_t n, Device d) {
                 auto x = std::make_shared<Tensor>(filled(n, 1.0, d).reshape({n / kCols, kCols}));
                 auto o = std::make_shared<Tensor>(Tensor::empty({kCols}, DType::Float32, d));
                 return std::function<void()>([=] { sum_rows(*o, *x); });
               }});
  // MSE (mean): the fused pass reads pred and target and writes the gradient.
  auto mse = [](bool fused) {
    return [fused](int64_t n, Device d) {
      auto p = std::make_shared<Tensor>(filled(n, 1.0, d));
      auto t = std::make_shared<Tensor>(filled(n, 0.5, d));
      auto g = std::make_shared<Tensor>(filled(n, 0.0, d));
      auto loss = std::make_shared<Tensor>(Tensor::empty({}, DType::Float32, d));
      auto one = std::make_shared<Tensor>(Tensor::empty({}, DType::Float32, d));
      fill(*one, 1.0);
      return std::function<void()>([=] {
        if (fused) {
          mse_loss_forward_backward(*loss, *g, *p, *t);
        } else {
          mse_loss_forward(*loss, *p, *t);
          mse_loss_backward(*g, *one, *p, *t);
        }
      });
    };
  };
  v.push_back({"mse_forward_backward_fused", 3, mse(true)});
  v.push_back({"mse_forward_then_backward", 3, mse(false)});
  // Bias + GELU forward without keeping the pre-activation: read x, write y.
  auto bias_gelu = [](bool fused) {
    return [fused](int64_t n, Device d) {
      auto x = std::make_shared<Tensor>(filled(n, 0.3, d).reshape({n / kCols, kCols}));
      auto b = std::make_shared<Tensor>(filled(kCols, 0.1, d));
      auto y = std::make_shared<Tensor>(filled(n, 0.0, d).reshape({n / kCols, kCols}));
      return std::function<void()>([=] {
        if (fused) {
          Tensor none;
          bias_activation_forward(*y, none, *x, *b, Activation::GELU);
        } else {
          bias_add(*y, *x, *b);
          activation_forward(*y, *y, Activation::GELU);
        }
      });
    };
  };
  v.push_back({"bias_gelu_fused", 2, bias_gelu(true)});
  v.push_back({"bias_add_then_gelu", 2, bias_gelu(false)});
  v.push_back({"bias_relu_backward_fused", 3, [](int64_t n, Device d) {
                 auto pre = std::make_shared<Tensor>(filled(n, 0.3, d).reshape({n / kCols, kCols}));
                 auto gy = std::make_shared<Tensor>(filled(n, 1.0, d).reshape({n / kCols, kCols}));
                 auto gp = std::make_shared<Tensor>(filled(n, 0.0, d).reshape({n / kCols, kCols}));
                 auto gb = std::make_shared<Tensor>(filled(kCols, 0.0, d));
                 return std::function<void()>(
                     [=] { bias_activation_backward(*gp, *gb, *gy, *pre, Activation::ReLU); });
               }});
  // Adam: reads param, grad, exp_avg, exp_avg_sq; writes param, exp_avg, exp_avg_sq.
  v.push_back({"adam_step_fused", 7, [](int64_t n, Device d) {
                 auto p = std::make_shared<Tensor>(filled(n, 0.5, d));
                 auto g = std::make_shared<Tensor>(filled(n, 1e-3, d));
                 auto m = std::make_shared<Tensor>(filled(n, 0.0, d));
                 auto s = std::make_shared<Tensor>(filled(n, 0.0, d));
                 auto none = std::make_shared<Tensor>();
                 const AdamStepArgs args =
                     adam_step_args(1e-3, 0.9, 0.999, 1e-8, 0.0, false, false, 10);
                 return std::function<void()>([=] { adam_step(*p, *g, *m, *s, *none, args); });
               }});
#if MINITRAIN_WITH_CUDA
  // The vendor baseline of the activation kernels (GPU only; cuDNN has no GELU mode).
  for (Activation a : {Activation::ReLU, Activation::Tanh}) {
    v.push_back(
        {std::string("cudnn_") + activation_name(a) + "_forward", 2, [a](int64_t n, Device d) {
           auto x = std::make_shared<Tensor>(filled(n, 0.3, d));
           auto y = std::make_shared<Tensor>(filled(n, 0.0, d));
           return std::function<void()>([=] { cudnn_activation_forward(*y, *x, a); });
         }});
    // cuDNN's backward reads y, dy and x: one operand more than minitrain's (dy and x).
    v.push_back(
        {std::string("cudnn_") + activation_name(a) + "_backward", 4, [a](int64_t n, Device d) {
           auto x = std::make_shared<Tensor>(filled(n, 0.3, d));
           auto y = std::make_shared<Tensor>(filled(n, 0.3, d));
           auto g = std::make_shared<Tensor>(filled(n, 1.0, d));
           auto o = std::make_shared<Tensor>(filled(n, 0.0, d));
           return std::function<void()>([=] { cudnn_activation_backward(*o, *g, *y, *x, a); });
         }});
  }
#endif
  return v;
}

void run(benchmark::State& state, const Op& op, Device d, int64_t n) {
  const std::function<void()> work = op.make(n, d);
  DeviceTimer timer(d);
  double seconds = 0;
  for (auto _ : state) {
    const double t = timer.time_seconds(work);
    state.SetIterationTime(t);
    seconds += t;
  }
  const double bytes = double(op.operands) * double(n) * 4.0;
  state.SetBytesProcessed(static_cast<int64_t>(bytes * double(state.iterations())));
  const double gbps = bytes * double(state.iterations()) / seconds / 1e9;
  const double copy_gbps = 2.0 * double(n) * 4.0 / copy_seconds(d, n) / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["copy_GB/s"] = copy_gbps;
  state.counters["pct_of_copy"] = 100.0 * gbps / copy_gbps;
}

}  // namespace

int main(int argc, char** argv) {
  const Device device = minitrain::bench::take_device_flag(argc, argv);
  const int threads = minitrain::bench::take_threads_flag(argc, argv, 2);
  minitrain::bench::add_device_context(device, threads);

  // 4 KiB (1024 floats) .. 1 GiB on a GPU, .. 256 MiB on the CPU, by factors of 4.
  const int64_t max_bytes = device.is_cuda() ? int64_t(1) << 30 : int64_t(256) << 20;
  for (const Op& op : ops()) {
    if (device.is_cpu() && minitrain::starts_with(op.name, "cudnn_"))
      continue;  // cuDNN runs on GPUs only
    for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const int64_t n = bytes / 4;
      const std::string size = bytes >= (1 << 20) ? std::to_string(bytes >> 20) + "MiB"
                                                  : std::to_string(bytes >> 10) + "KiB";
      benchmark::RegisterBenchmark(("memory/" + op.name + "/" + size).c_str(),
                                   [op, device, n](benchmark::State& s) { run(s, op, device, n); })
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
