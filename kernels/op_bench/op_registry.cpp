// The op-variant registry: a map from op name to family, verification against the CPU
// reference, and timing with the benchmarks' one loop (kernels/op_bench/device_timer.h).

#include "kernels/op_bench/op_registry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "core/strings.h"
#include "kernels/op_bench/device_timer.h"

namespace minitrain::opbench {
namespace {

std::map<std::string, OpFamily>& table() {
  static std::map<std::string, OpFamily> t;  // constructed on first use: safe from static init
  return t;
}
std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}

void check_variant_shape(const std::string& op, const OpVariant& v) {
  MT_CHECK_AS(ValueError, !v.name.empty(), "op '", op, "': a variant needs a name");
  MT_CHECK_AS(ValueError, bool(v.run), "op '", op, "', variant '", v.name, "': run is null");
  MT_CHECK_AS(ValueError, !v.devices.empty(), "op '", op, "', variant '", v.name,
              "': devices is empty");
}

std::vector<std::string> variant_names(const OpFamily& f) {
  std::vector<std::string> names;
  for (const OpVariant& v : f.variants) names.push_back(v.name);
  return names;
}

// A fixed 64-bit generator (splitmix64): the same values everywhere, unlike std's distributions.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

void register_op(OpFamily family) {
  MT_CHECK_AS(ValueError, !family.name.empty(), "register_op: an op needs a name");
  MT_CHECK_AS(ValueError, family.make && family.reference && family.bytes, "register_op: op '",
              family.name, "' needs make, reference and bytes");
  std::vector<std::string> seen;
  for (const OpVariant& v : family.variants) {
    check_variant_shape(family.name, v);
    MT_CHECK_AS(ValueError, std::find(seen.begin(), seen.end(), v.name) == seen.end(), "op '",
                family.name, "': variant '", v.name, "' is registered twice");
    seen.push_back(v.name);
  }
  std::lock_guard<std::mutex> lock(table_mutex());
  MT_CHECK_AS(ValueError, table().count(family.name) == 0, "register_op: op '", family.name,
              "' is already registered");
  const std::string name = family.name;
  table().emplace(name, std::move(family));
}

void add_op_variant(const std::string& op, OpVariant variant) {
  check_variant_shape(op, variant);
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(op);
  MT_CHECK_AS(ValueError, it != table().end(), "add_op_variant: unknown op '", op, "'");
  for (const OpVariant& v : it->second.variants)
    MT_CHECK_AS(ValueError, v.name != variant.name, "add_op_variant: op '", op,
                "' already has a variant '", variant.name, "'");
  it->second.variants.push_back(std::move(variant));
}

void remove_op_variant(const std::string& op, const std::string& variant) {
  std::lock_guard<std::mutex> lock(table_mutex());
  auto it = table().find(op);
  if (it == table().end()) return;
  auto& vs = it->second.variants;
  vs.erase(
      std::remove_if(vs.begin(), vs.end(), [&](const OpVariant& v) { return v.name == variant; }),
      vs.end());
}

std::vector<std::string> op_names() {
  std::lock_guard<std::mutex> lock(table_mutex());
  std::vector<std::string> names;
  for (const auto& [name, f] : table()) names.push_back(name);
  return names;
}

bool has_op(const std::string& name) {
  std::lock_guard<std::mutex> lock(table_mutex());
  return table().count(name) != 0;
}

const OpFamily& op_family(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(table_mutex());
    auto it = table().find(name);
    if (it != table().end()) return it->second;
  }
  MT_THROW(ValueError, "unknown op '", name, "' (ops: ", join(op_names(), ", "),
           "); see minitrain bench op");
}

const OpVariant& op_variant(const std::string& op, const std::string& variant) {
  const OpFamily& f = op_family(op);
  for (const OpVariant& v : f.variants)
    if (v.name == variant) return v;
  MT_THROW(ValueError, "op '", op, "' has no variant '", variant,
           "' (variants: ", join(variant_names(f), ", "), ")");
}

bool runs_on(const OpVariant& variant, DeviceType type) {
  return std::find(variant.devices.begin(), variant.devices.end(), type) != variant.devices.end();
}

Verification verify_variant(const OpFamily& op, const OpVariant& variant, Device device,
                            int64_t n) {
  MT_CHECK_AS(DeviceError, runs_on(variant, device.type()), "op '", op.name, "', variant '",
              variant.name, "' does not run on ", device.str());
  MT_CHECK_AS(ValueError, n >= 1, "op '", op.name, "': size must be at least 1, got ", n);
  OpTensors want = op.make(n, Device::cpu());
  op.reference(want);
  OpTensors got = op.make(n, device);
  variant.run(got);
  current_stream(device).synchronize();

  Verification result;
  result.tolerance = op.tolerance;
  MT_CHECK(got.out.size() == want.out.size(), "op '", op.name, "', variant '", variant.name,
           "': ", got.out.size(), " outputs but the reference has ", want.out.size());
  for (std::size_t k = 0; k < want.out.size(); ++k) {
    const Tensor g = got.out[k].to(Device::cpu());
    const Tensor& w = want.out[k];
    MT_CHECK(g.numel() == w.numel() && g.dtype() == DType::Float32 && w.dtype() == DType::Float32,
             "op '", op.name, "', variant '", variant.name, "': out[", k, "] is ", g.numel(), " ",
             g.dtype(), " elements, the reference's ", w.numel(), " ", w.dtype(),
             " (the registry compares float32 outputs)");
    const float* gp = g.data<float>();
    const float* wp = w.data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) {
      double e = std::abs(double(gp[i]) - double(wp[i])) / (1.0 + std::abs(double(wp[i])));
      if (std::isnan(gp[i]) != std::isnan(wp[i])) e = INFINITY;
      if (std::isnan(e)) e = 0;  // both NaN
      if (e > result.max_error) {
        result.max_error = e;
        std::ostringstream where;
        where.precision(9);
        where << "out[" << k << "][" << i << "]: got " << gp[i] << " want " << wp[i];
        result.where = where.str();
      }
    }
  }
  return result;
}

Verification check_variant(const OpFamily& op, const OpVariant& variant, Device device, int64_t n) {
  const Verification v = verify_variant(op, variant, device, n);
  if (!v.ok())
    MT_THROW(WrongResult, "op '", op.name, "', variant '", variant.name, "' on ", device.str(),
             " at size ", n, " is WRONG: max error ", v.max_error, " > tolerance ", v.tolerance,
             " (", v.where, ")");
  return v;
}

double variant_bytes(const OpFamily& op, const OpVariant& variant, int64_t n) {
  return variant.bytes ? variant.bytes(n) : op.bytes(n);
}

double time_variant(const OpFamily& op, const OpVariant& variant, Device device, int64_t n,
                    int runs) {
  MT_CHECK_AS(DeviceError, runs_on(variant, device.type()), "op '", op.name, "', variant '",
              variant.name, "' does not run on ", device.str());
  OpTensors t = op.make(n, device);
  // Emulated GPUs have no L2 to flush, and the 256 MiB flush is seconds of emulated fill per run
  // (it made the wrong-variant test take 54 s); their times mean nothing anyway (copy_seconds).
  const bool emulated = device.is_cuda() && cuda_emulated();
  return bench::mean_call_seconds(
      device, [&] { variant.run(t); }, runs, 0.2, !emulated);
}

double copy_seconds(Device device, int64_t n) {
  static std::mutex m;
  static std::map<std::pair<int, int64_t>, double> cache;
  const auto key = std::make_pair(device.is_cuda() ? device.index() : -1, n);
  {
    std::lock_guard<std::mutex> lock(m);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  Tensor src = uniform({n}, device, 1), dst = Tensor::empty({n}, DType::Float32, device);
  auto work = [&] {
    if (device.is_cuda())
      dst.copy_(src);  // cudaMemcpyAsync on the current stream
    else  // memcpy in chunks over minitrain's CPU threads: the roof for kernels that use them all
      parallel_for(n, int64_t(1) << 16, [&](int64_t begin, int64_t end) {
        std::memcpy(dst.data<float>() + begin, src.data<float>() + begin,
                    static_cast<std::size_t>(end - begin) * 4);
      });
  };
  // Enough runs for about 20 ms of copying at 50 GB/s, at least 5.
  const bool emulated = device.is_cuda() && cuda_emulated();  // as in time_variant
  const int runs =
      emulated ? 1 : static_cast<int>(std::clamp<int64_t>((int64_t(1) << 30) / (n * 8), 5, 2000));
  const double s = bench::mean_call_seconds(device, work, runs, 0.02, !emulated);
  std::lock_guard<std::mutex> lock(m);
  return cache[key] = s;
}

Tensor uniform_cpu(const Shape& shape, uint64_t seed, float lo, float hi) {
  Tensor t = Tensor::empty(shape, DType::Float32, Device::cpu());
  float* p = t.data<float>();
  uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double u = double(splitmix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    p[i] = lo + static_cast<float>(u) * (hi - lo);
  }
  return t;
}

Tensor uniform(const Shape& shape, Device device, uint64_t seed, float lo, float hi) {
  return uniform_cpu(shape, seed, lo, hi).to(device);
}

Shape matrix_shape(int64_t n) {
  int64_t c = std::min<int64_t>(n, 1024);
  while (n % c != 0) --c;
  return Shape{n / c, c};
}

}  // namespace minitrain::opbench
