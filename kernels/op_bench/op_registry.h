#pragma once
// Every non-GEMM op that can be benchmarked, by name, with its variants: the GEMM registry's idea
// (kernels/gemm/gemm_registry.h) for element-wise, reduction, loss, fused and optimizer kernels.
// An op family says how to make its tensors for a size, what its CPU reference computes, and how
// many bytes and FLOPs one call moves; each variant is one way to compute it on a device. A file
// in kernels/op_bench/ops/ registers one family (MINITRAIN_REGISTER_OP); the folder is globbed, so
// adding that one file is all a new op's benchmark needs. `minitrain bench op NAME` and
// bench/memory_bench.cpp both read this table, and both verify a variant against the reference
// before they time it.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"

namespace minitrain::opbench {

/// The tensors of one call: `in` only read, `out` written (and compared with the reference). An
/// operand updated in place (axpy's y, Adam's state) is in `out`, with its starting values.
struct OpTensors {
  std::vector<Tensor> in;
  std::vector<Tensor> out;
};

/// One way to compute an op.
struct OpVariant {
  std::string name;       ///< "fused", "unfused", "vec4", "cudnn", ... (named by technique)
  std::string technique;  ///< one line: what it does, what bounds it
  /// The device types it runs on: {CPU, CUDA} for a dispatching entry point, {CUDA} for a kernel
  /// launched directly.
  std::vector<DeviceType> devices = {DeviceType::CPU, DeviceType::CUDA};
  std::function<void(OpTensors&)> run;  ///< required: computes `out` from `in`
  /// Bytes it moves when that differs from the family's (cuDNN's activation backward reads y as
  /// well); empty: the family's. An unfused composition keeps the family's (fused) count, so its
  /// lower GB/s is what fusing saves.
  std::function<double(int64_t n)> bytes = {};
};

/// An op: its tensors, its reference and its cost, and the variants that compute it.
struct OpFamily {
  std::string name;  ///< "bias_gelu", "mse_none_forward_backward", ...
  std::string what;  ///< one line for the listing
  /// The tensors for size n (elements of the main operand), on `device`, with the same values
  /// on every device (make them on the CPU with fill_uniform, then .to(device)).
  std::function<OpTensors(int64_t n, Device device)> make;
  /// The CPU reference: computes `out` from `in` on CPU tensors.
  std::function<void(OpTensors&)> reference;
  /// DRAM bytes read + written by one call for size n (the minimum the op needs).
  std::function<double(int64_t n)> bytes;
  /// Floating-point operations of one call; empty or 0: memory-bound, not compared with a peak.
  std::function<double(int64_t n)> flops = {};
  /// Largest |variant - reference| / (1 + |reference|) accepted. 0: bit-exact. Reductions differ
  /// in summation order; a GPU's erf/exp/tanh and FMA contraction in the last bits.
  double tolerance = 0;
  std::vector<OpVariant> variants;
};

/// Adds a family (its variants with it). ValueError when the name is empty or taken, when make,
/// reference or bytes is null, or when a variant is malformed (see add_op_variant).
void register_op(OpFamily family);
/// Adds a variant to a registered family (a test's own variant, a user's kernel). ValueError when
/// the op is unknown, the name is empty or taken in that family, run is null or devices empty.
void add_op_variant(const std::string& op, OpVariant variant);
/// Removes a variant (for tests that add one); nothing when there is no such variant.
void remove_op_variant(const std::string& op, const std::string& variant);

/// Registered op names, sorted.
std::vector<std::string> op_names();
bool has_op(const std::string& name);
/// The family called `name`. ValueError naming it and listing the registered ops otherwise.
const OpFamily& op_family(const std::string& name);
/// The variant `variant` of `op`. ValueError naming both and listing the op's variants otherwise.
const OpVariant& op_variant(const std::string& op, const std::string& variant);
/// Whether the variant runs on this device type.
bool runs_on(const OpVariant& variant, DeviceType type);

/// A variant's output differs from the reference beyond the family's tolerance.
class WrongResult : public Error {
 public:
  using Error::Error;
};

/// What verify_variant found.
struct Verification {
  double max_error = 0;  ///< max over outputs and elements of |got - want| / (1 + |want|)
  double tolerance = 0;
  std::string where;  ///< "out[1][37]: got 0.5 want 0.25" at the worst element ("" when exact)
  bool ok() const { return max_error <= tolerance; }
};

/// Runs `variant` once on `device` on fresh tensors of size n and compares every output with the
/// CPU reference on the same values. Does not throw for a wrong result (see check_variant);
/// DeviceError when the variant does not run on that device.
Verification verify_variant(const OpFamily& op, const OpVariant& variant, Device device, int64_t n);
/// verify_variant, then WrongResult naming the op, the variant, the device, n, the max error, the
/// tolerance and the worst element when it is beyond the tolerance.
Verification check_variant(const OpFamily& op, const OpVariant& variant, Device device, int64_t n);

/// Bytes the variant moves per call for size n.
double variant_bytes(const OpFamily& op, const OpVariant& variant, int64_t n);

/// Mean seconds per call of the variant at size n on `device` (kernels/op_bench/device_timer.h's
/// loop: events with L2 flushed on a GPU, the host clock on the CPU). Does not verify.
double time_variant(const OpFamily& op, const OpVariant& variant, Device device, int64_t n,
                    int runs = 20);
/// Mean seconds of a device-to-device copy of n floats (cudaMemcpyAsync on a GPU; std::memcpy in
/// chunks over minitrain's CPU threads on the CPU), measured once per (device, n) per process:
/// the bandwidth roof a memory-bound op is compared with. 2 * 4 * n bytes move per copy.
double copy_seconds(Device device, int64_t n);

// ---- helpers for the family files ----

/// A float32 tensor of `shape` on the CPU with values uniform in [lo, hi) from a fixed
/// generator seeded by `seed` (the same values on every run and platform).
Tensor uniform_cpu(const Shape& shape, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
/// uniform_cpu(...).to(device).
Tensor uniform(const Shape& shape, Device device, uint64_t seed, float lo = -1.0f, float hi = 1.0f);
/// A matrix shape [n / c, c] for n elements: c = 1024 (a Linear layer's width) when n is a
/// multiple of it, else the largest divisor of n not above 1024 (odd n gives odd rows and
/// columns, which the tests use to reach the kernels' unaligned paths).
Shape matrix_shape(int64_t n);

}  // namespace minitrain::opbench

/// Registers an op family at static-initialisation time, from a file of kernels/op_bench/ops/
/// (built as an object library, so the registration is never dropped by the linker):
///   MINITRAIN_REGISTER_OP(add, [] { minitrain::opbench::OpFamily f; ...; return f; }())
#define MINITRAIN_REGISTER_OP(id, ...)                        \
  namespace {                                                 \
  const bool minitrain_op_registered_##id =                   \
      (::minitrain::opbench::register_op(__VA_ARGS__), true); \
  }
