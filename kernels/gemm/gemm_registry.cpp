// The GEMM registry: one process-wide table of named backends behind a mutex. Built-ins are added
// when the table is first touched (by a lookup or by a user's registration, whichever comes
// first), so a user's MINITRAIN_REGISTER_GEMM at static-initialisation time finds them there and
// cannot take their names. Entries are never removed, so references handed out stay valid.

#include "kernels/gemm/gemm_registry.h"

#include "core/op_profiler.h"

#include <memory>
#include <mutex>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/op_profiler.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_builtin.h"
#include "kernels/gemm/gemm_check.h"

#if MINITRAIN_WITH_CUDA
#include "kernels/gemm/gemm_ladder/gemm_ladder.h"
#endif

namespace minitrain {

GemmBackend openblas_gemm_backend() {
  GemmBackend g;
  g.name = "openblas";
  g.device = DeviceType::CPU;
  g.technique =
      "OpenBLAS single-threaded AVX2/AVX-512 kernels, one per tile of C, on OpenMP threads "
      "(compute-bound)";
  g.float32 = [](Device, float* c, const float* a, bool ta, const float* b, bool tb, int64_t m,
                 int64_t n, int64_t k, float alpha,
                 float beta) { gemm_cpu<float>(c, a, ta, b, tb, m, n, k, alpha, beta); };
  g.float64 = [](Device, double* c, const double* a, bool ta, const double* b, bool tb, int64_t m,
                 int64_t n, int64_t k, double alpha,
                 double beta) { gemm_cpu<double>(c, a, ta, b, tb, m, n, k, alpha, beta); };
  return g;
}

namespace {

class Registry {
 public:
  Registry() {
    add(openblas_gemm_backend());
    add(eigen_gemm_backend());
    add(reference_gemm_backend());
#if MINITRAIN_WITH_CUDA_LIBS
    add(cublas_gemm_backend());
    add(cublas_tf32_gemm_backend());
    add(cublas_bf16_gemm_backend());
    add(cublaslt_gemm_backend());
#endif
#if MINITRAIN_WITH_CUDA
    for (GemmBackend& g : cuda_gemm_ladder_backends()) add(std::move(g));
#endif
  }

  void add(GemmBackend backend) {
    std::lock_guard<std::mutex> lock(mutex_);
    MT_CHECK_AS(ValueError, !backend.name.empty(),
                "register_gemm_backend: the backend has an empty name");
    MT_CHECK_AS(ValueError, backend.name != "auto",
                "register_gemm_backend: 'auto' is reserved (it means ",
                "the device's default backend); choose another name");
    MT_CHECK_AS(ValueError, find(backend.name) == nullptr,
                "register_gemm_backend: a backend named '", backend.name,
                "' is already registered (", names_locked(), "); choose another name");
    MT_CHECK_AS(ValueError, static_cast<bool>(backend.float32), "register_gemm_backend: backend '",
                backend.name, "' has no float32 function; float32 is required");
    backends_.push_back(std::make_unique<GemmBackend>(std::move(backend)));
  }

  const GemmBackend& get(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    const GemmBackend* g = find(name);
    MT_CHECK_AS(ValueError, g != nullptr, "unknown GEMM backend '", name,
                "'; registered: ", names_locked(), " (or 'auto' for the device's default)");
    return *g;
  }

  bool has(const std::string& name) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return find(name) != nullptr;
  }

  std::vector<std::string> names(DeviceType device) const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<std::string> out;
    for (const auto& g : backends_)
      if (g->device == device) out.push_back(g->name);
    return out;
  }

 private:
  const GemmBackend* find(const std::string& name) const {
    for (const auto& g : backends_)
      if (g->name == name) return g.get();
    return nullptr;
  }

  // "openblas, eigen, cublas, ..." in registration order.
  std::string names_locked() const {
    std::ostringstream os;
    for (size_t i = 0; i < backends_.size(); ++i) os << (i ? ", " : "") << backends_[i]->name;
    return os.str();
  }

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<GemmBackend>> backends_;  // unique_ptr: references outlive growth
};

// A function-local static: constructed on first use, whichever translation unit's static
// initialiser gets here first, and thread-safe from C++11 on.
Registry& registry() {
  static Registry r;
  return r;
}

}  // namespace

void register_gemm_backend(GemmBackend backend) { registry().add(std::move(backend)); }

const GemmBackend& gemm_backend(const std::string& name) { return registry().get(name); }

bool has_gemm_backend(const std::string& name) { return registry().has(name); }

std::vector<std::string> gemm_backend_names(DeviceType device) { return registry().names(device); }

std::string default_gemm_backend(Device device) {
  // CUDA: cuBLAS in full FP32, the fastest FP32 GEMM until the hand-written ladder is measured on a
  // GPU (bench/gemm_bench.cpp), and the one whose results match the CPU within float32 rounding.
  // CPU: OpenBLAS, measured faster than Eigen at every shape bench/gemm_bench.cpp runs.
  // Emulated GPUs have no cuBLAS: the top of the FP32 ladder, which also runs fastest there.
  if (device.is_cuda()) return cuda_emulated() ? "warptile" : "cublas";
  return "openblas";
}

bool gemm_backend_takes(const GemmBackend& backend, DType precision) {
  if (backend.precisions.empty()) return true;
  for (DType p : backend.precisions)
    if (p == precision) return true;
  return false;
}

void check_gemm_precision(const std::string& name, DType precision) {
  if (name == "auto") return;
  const GemmBackend& g = gemm_backend(name);
  if (gemm_backend_takes(g, precision)) return;
  std::string can;
  for (const std::string& other : gemm_backend_names(g.device))
    if (gemm_backend_takes(gemm_backend(other), precision))
      can += (can.empty() ? "" : ", ") + other;
  MT_THROW(ValueError, "GEMM backend '", name, "' cannot take precision ",
           precision_name(precision), " (it rounds its inputs: ", g.technique,
           "); backends that can: ", can, ", or auto");
}

void gemm_with(const std::string& backend, Tensor& c, const Tensor& a, bool trans_a,
               const Tensor& b, bool trans_b, double alpha, double beta) {
  const GemmDims d = check_gemm_operands("gemm_with", c, a, trans_a, b, trans_b);
  const Device device = c.device();
  const GemmBackend& g = gemm_backend(backend == "auto" ? default_gemm_backend(device) : backend);
  MT_CHECK_AS(ValueError, g.device == device.type(), "gemm_with: backend '", g.name, "' runs on ",
              g.device == DeviceType::CUDA ? "cuda" : "cpu", " devices but the tensors are on ",
              device, "; use 'auto' or one of the ", device.is_cuda() ? "cuda" : "cpu",
              " backends");
  if (d.m == 0 || d.n == 0) return;
  const OpTimer timer("gemm", device);  // --profile-kernels (core/op_profiler.h)
  if (c.dtype() == DType::Float64) {
    if (!g.float64) {
      std::string with_float64;
      for (const std::string& name : gemm_backend_names(device.type()))
        if (gemm_backend(name).float64)
          with_float64 += (with_float64.empty() ? "'" : ", '") + name + "'";
      MT_THROW(ValueError, "gemm_with: backend '", g.name, "' has no float64 path (tensors on ",
               device, ", dtype float64); use float32",
               with_float64.empty() ? std::string(" (no ") + (device.is_cuda() ? "cuda" : "cpu") +
                                          " backend in this build has float64" +
                                          (device.is_cuda() && cuda_emulated()
                                               ? ": cuBLAS, which has, is absent on emulated GPUs)"
                                               : ")")
                                    : ", or a backend with float64: " + with_float64);
    }
    g.float64(device, c.data<double>(), a.data<double>(), trans_a, b.data<double>(), trans_b, d.m,
              d.n, d.k, alpha, beta);
    return;
  }
  g.float32(device, c.data<float>(), a.data<float>(), trans_a, b.data<float>(), trans_b, d.m, d.n,
            d.k, float(alpha), float(beta));
}

namespace {

bool mixed_dtype(DType t) {
  return t == DType::Float32 || t == DType::BFloat16 || t == DType::Float16;
}

bool takes_mixed(const GemmBackend& g, DType c, DType a, DType b, bool bias) {
  if (!g.mixed || (bias && !g.mixed_bias)) return false;
  if (!mixed_dtype(c) || !mixed_dtype(a) || !mixed_dtype(b)) return false;
  if (c == DType::Float32 && a == DType::Float32 && b == DType::Float32) return false;
  if (g.mixed_equal_inputs) return a == b && is_half(a) && (c == a || c == DType::Float32);
  return true;
}

}  // namespace

bool gemm_takes_mixed(const std::string& backend, Device device, DType c, DType a, DType b,
                      bool bias) {
  const GemmBackend& g = gemm_backend(backend == "auto" ? default_gemm_backend(device) : backend);
  return g.device == device.type() && takes_mixed(g, c, a, b, bias);
}

void gemm_mixed_with(const std::string& backend, Tensor& c, const Tensor& a, bool trans_a,
                     const Tensor& b, bool trans_b, double alpha, double beta, const Tensor& bias) {
  const GemmDims d = check_gemm_mixed_operands("gemm_mixed_with", c, a, trans_a, b, trans_b, bias);
  const Device device = c.device();
  const GemmBackend& g = gemm_backend(backend == "auto" ? default_gemm_backend(device) : backend);
  MT_CHECK_AS(ValueError, g.device == device.type(), "gemm_mixed_with: backend '", g.name,
              "' runs on ", g.device == DeviceType::CUDA ? "cuda" : "cpu",
              " devices but the tensors are on ", device, "; use 'auto' or one of the ",
              device.is_cuda() ? "cuda" : "cpu", " backends");
  if (!takes_mixed(g, c.dtype(), a.dtype(), b.dtype(), bias.defined())) {
    std::string can;
    for (const std::string& name : gemm_backend_names(device.type()))
      if (takes_mixed(gemm_backend(name), c.dtype(), a.dtype(), b.dtype(), bias.defined()))
        can += (can.empty() ? "" : ", ") + name;
    MT_THROW(ValueError, "gemm_mixed_with: backend '", g.name, "' has no mixed GEMM for c ",
             c.dtype(), ", a ", a.dtype(), ", b ", b.dtype(), bias.defined() ? " with a bias" : "",
             "; backends that have: ", can.empty() ? std::string("none") : can,
             " (or widen the operands and use gemm_with)");
  }
  if (d.m == 0 || d.n == 0) return;
  const OpTimer timer("gemm", device);  // --profile-kernels (core/op_profiler.h)
  GemmMixedCall call{c.raw_data(), c.dtype(),
                     a.raw_data(), a.dtype(),
                     trans_a,      b.raw_data(),
                     b.dtype(),    trans_b,
                     d.m,          d.n,
                     d.k,          float(alpha),
                     float(beta),  bias.defined() ? bias.data<float>() : nullptr};
  g.mixed(device, call);
}

}  // namespace minitrain
