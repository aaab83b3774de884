// `minitrain bench op`: the op-variant registry's listing, and per op: verify every variant
// against the CPU reference, then time the ones that are right beside a copy of the same size
// measured in the same run. A wrong variant is reported with its max error and never timed.

#include "tools/op_bench_command.h"

#include <algorithm>
#include <cstdio>
#include <iomanip>
#include <sstream>

#include "core/cpu_features.h"
#include "core/device.h"
#include "core/error.h"
#include "core/parallel_for.h"
#include "core/strings.h"
#include "kernels/op_bench/op_registry.h"

namespace minitrain::cli {
namespace {

using opbench::OpFamily;
using opbench::OpVariant;

std::string device_types(const OpVariant& v) {
  std::vector<std::string> names;
  for (DeviceType t : v.devices) names.push_back(t == DeviceType::CPU ? "cpu" : "cuda");
  return join(names, ",");
}

int list(std::ostream& out) {
  out << "ops (minitrain bench op NAME [VARIANT...] [--size N ...] [--device D]):\n";
  for (const std::string& name : opbench::op_names()) {
    const OpFamily& f = opbench::op_family(name);
    out << "  " << name << ": " << f.what << "\n";
    for (const OpVariant& v : f.variants)
      out << "    " << std::left << std::setw(12) << v.name << std::setw(10) << device_types(v)
          << v.technique << "\n";
  }
  out << "a new op: one file in kernels/op_bench/ops/ (see docs/op_bench.md)\n";
  return 0;
}

std::string fixed(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

std::string describe_time(double seconds) {
  if (seconds < 1e-3) return fixed(seconds * 1e6, 2) + " us";
  return fixed(seconds * 1e3, 3) + " ms";
}

std::string size_label(int64_t n) {
  const int64_t bytes = n * 4;
  if (bytes >= (int64_t(1) << 20)) return fixed(double(bytes) / double(1 << 20), 1) + " MiB";
  return fixed(double(bytes) / 1024.0, 1) + " KiB";
}

}  // namespace

int run_op_bench(const OpBenchRequest& request, std::ostream& out, std::ostream& err) {
  if (request.words.empty()) return list(out);
  const OpFamily& op = opbench::op_family(request.words[0]);  // ValueError naming the ops
  std::vector<const OpVariant*> variants;
  for (std::size_t i = 1; i < request.words.size(); ++i)
    variants.push_back(&opbench::op_variant(op.name, request.words[i]));
  const Device device = Device::parse(request.device);
  check_available(device);
  if (variants.empty())
    for (const OpVariant& v : op.variants) variants.push_back(&v);
  for (int64_t n : request.sizes)
    MT_CHECK_AS(ValueError, n >= 1, "minitrain bench op: --size must be at least 1, got ", n);
  MT_CHECK_AS(ValueError, request.runs >= 1, "minitrain bench op: --runs must be at least 1, got ",
              request.runs);

  const bool emulated = device.is_cuda() && cuda_emulated();
  std::vector<int64_t> sizes = request.sizes;
  if (sizes.empty())  // 64 MiB per operand on a GPU, 16 MiB on the CPU, 256 KiB emulated
    sizes = {emulated ? int64_t(1) << 16 : device.is_cuda() ? int64_t(1) << 24 : int64_t(1) << 22};

  std::string where = device.str();
  if (device.is_cpu()) where += " (" + std::to_string(num_threads()) + " threads)";
  for (const CudaDeviceInfo& info : cuda_devices())
    if (device.is_cuda() && info.index == device.index()) where += " (" + info.name + ")";
  out << "op " << op.name << ": " << op.what << "\non " << where << "\n";
  if (emulated)
    out << "note: emulated GPU (cuda_emu): every variant is verified against the CPU reference, "
           "but times, GB/s and % of copy are the emulator's and say nothing about a GPU\n";
  const std::string copy_name = device.is_cuda() ? "cudaMemcpyAsync" : "memcpy";

  int wrong = 0;
  for (int64_t n : sizes) {
    const double copy_s = opbench::copy_seconds(device, n);
    const double copy_gbps = 2.0 * 4.0 * double(n) / copy_s / 1e9;
    const double flops = op.flops ? op.flops(n) : 0.0;
    out << "\nsize " << n << " (" << size_label(n) << " per float32 operand); " << copy_name
        << " of the same size in this run: " << describe_time(copy_s) << ", " << fixed(copy_gbps, 1)
        << " GB/s\n";
    // Compute-bound where the op's FLOPs per byte exceed the CPU's peak over the copy bandwidth
    // (the roofline's ridge); GPUs have no peak table here, so their ops are compared with copy.
    double ridge = 0, peak_gflops = 0;
    if (device.is_cpu() && flops > 0) {
      peak_gflops = cpu_peak_fp32().gflops();
      ridge = peak_gflops / copy_gbps;
    }
    const bool compute_bound = ridge > 0 && flops / op.bytes(n) > ridge;
    out << "  " << std::left << std::setw(12) << "variant" << std::setw(26) << "verified"
        << std::right << std::setw(12) << "time" << std::setw(10) << "GB/s" << std::setw(11)
        << "% of copy";
    if (compute_bound) out << std::setw(10) << "GFLOP/s" << std::setw(11) << "% of peak";
    out << "\n";
    for (const OpVariant* v : variants) {
      out << "  " << std::left << std::setw(12) << v->name;
      if (!opbench::runs_on(*v, device.type())) {
        out << "does not run on " << device.str() << " (runs on " << device_types(*v) << ")\n";
        continue;
      }
      const opbench::Verification check = opbench::verify_variant(op, *v, device, n);
      if (!check.ok()) {
        ++wrong;
        out << "WRONG: max error " << check.max_error << " > tolerance " << check.tolerance << " ("
            << check.where << "); not timed\n";
        err << "minitrain bench op: op '" << op.name << "', variant '" << v->name << "' on "
            << device.str() << " at size " << n << " is WRONG: max error " << check.max_error
            << " > tolerance " << check.tolerance << " (" << check.where << ")\n";
        continue;
      }
      const std::string verified =
          check.max_error == 0 ? "exact" : "max error " + fixed(check.max_error * 1e9, 1) + "e-9";
      const double s = opbench::time_variant(op, *v, device, n, request.runs);
      const double gbps = opbench::variant_bytes(op, *v, n) / s / 1e9;
      out << std::setw(26) << verified << std::right << std::setw(12) << describe_time(s)
          << std::setw(10) << fixed(gbps, 1) << std::setw(10) << fixed(100.0 * gbps / copy_gbps, 1)
          << "%";
      if (compute_bound) {
        const double gflops = flops / s / 1e9;
        out << std::setw(10) << fixed(gflops, 1) << std::setw(10)
            << fixed(100.0 * gflops / peak_gflops, 1) << "%";
      }
      out << "\n";
    }
  }
  if (wrong > 0) {
    err << "minitrain bench op: " << wrong << " wrong variant(s) of '" << op.name
        << "' (not timed)\n";
    return 1;
  }
  return 0;
}

}  // namespace minitrain::cli
