#pragma once
// Every GEMM implementation by name, so that a layer, a benchmark or a test picks one at run time:
// the hand-written CUDA ladder (kernels/gemm/gemm_ladder/), cuBLAS, cuBLASLt, and the CPU's
// OpenBLAS and Eigen. A user's own kernel joins with one call (or MINITRAIN_REGISTER_GEMM in their
// binary) and is then usable as `minitrain train --gemm NAME` and by Linear::set_gemm_backend.
//
// Every backend computes the row-major C[m, n] = alpha * op(A) op(B) + beta * C of
// kernels/gemm/gemm.h on raw contiguous pointers, on the calling thread's current stream for its
// device.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/tensor.h"

namespace minitrain {

using GemmFloatFn =
    std::function<void(Device device, float* c, const float* a, bool trans_a, const float* b,
                       bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta)>;
using GemmDoubleFn =
    std::function<void(Device device, double* c, const double* a, bool trans_a, const double* b,
                       bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, double beta)>;

/// Mixed precision's GEMM (issue 35) on raw row-major pointers: C = alpha op(A) op(B) + beta C,
/// then + bias[j] on every row when `bias` is set, with A, B and C each float32, bfloat16 or
/// float16: every product of widened (exact) operands summed in float32, C rounded once at the
/// store. No cast around the GEMM: a layer under --precision bf16/fp16 hands it its 16-bit
/// activations and gradients as they are.
struct GemmMixedCall {
  void* c;
  DType c_dtype;
  const void* a;
  DType a_dtype;
  bool trans_a;
  const void* b;
  DType b_dtype;
  bool trans_b;
  int64_t m, n, k;
  float alpha, beta;
  const float* bias = nullptr;  ///< float32 [n], added after alpha op(A) op(B) + beta C
};
using GemmMixedFn = std::function<void(Device device, const GemmMixedCall& call)>;

struct GemmBackend {
  std::string name;       ///< "cublas", "naive", "warptile", "openblas", ...
  DeviceType device;      ///< where its pointers live
  std::string technique;  ///< one line: what it does and what bounds it
  /// Float32 inputs rounded before the multiply (TF32, BF16): results differ from FP32 by the
  /// inputs' rounding, so tests compare them on exactly representable values only.
  bool reduced_precision_inputs = false;
  GemmFloatFn float32;   ///< required
  GemmDoubleFn float64;  ///< optional: null when the backend has no float64 path
  /// The training precisions (--precision) it takes. Under bf16/fp16 a layer hands a backend
  /// without `mixed` its 16-bit operands widened to float32, so a backend that multiplies float32
  /// exactly (or rounds to TF32, which holds every bfloat16 and float16 value) computes the 16-bit
  /// product exactly; tc_bf16 rounds its inputs to bfloat16 and so takes float32 (approximately, as
  /// reduced_precision_inputs says) and bfloat16, not float16. Empty: every precision.
  std::vector<DType> precisions = {};
  /// Optional: the GEMM on 16-bit operands (GemmMixedCall). Null: a layer widens its 16-bit
  /// operands to float32 for `float32` and rounds the result (the cast path).
  GemmMixedFn mixed = nullptr;
  /// `mixed` takes only A and B of one 16-bit dtype and C of that dtype or float32 (the type
  /// table of cublasGemmEx and cublasLtMatmul with CUBLAS_COMPUTE_32F); false: any combination.
  bool mixed_equal_inputs = false;
  /// `mixed` adds a bias in its epilogue; false: its calls have no bias.
  bool mixed_bias = false;
};

/// Adds a backend. ValueError when the name is taken or empty, or float32 is null.
void register_gemm_backend(GemmBackend backend);
/// The backend called `name`. ValueError naming it and listing the registered names otherwise.
const GemmBackend& gemm_backend(const std::string& name);
bool has_gemm_backend(const std::string& name);
/// Registered names for a device type, in registration order (the ladder in its order).
std::vector<std::string> gemm_backend_names(DeviceType device);
/// The backend "auto" means on `device`: the fastest measured (docs/measurements.md, The CPU GEMM).
std::string default_gemm_backend(Device device);

/// Whether `backend` takes training precision `precision` (see GemmBackend::precisions).
bool gemm_backend_takes(const GemmBackend& backend, DType precision);
/// ValueError when the backend `name` ("auto": always fine) cannot take `precision`, naming the
/// backends of its device type that can.
void check_gemm_precision(const std::string& name, DType precision);

/// kernels/gemm/gemm.h's gemm through a named backend ("auto": default_gemm_backend). Checks shapes
/// and devices as gemm() does; ValueError when the backend is for another device type or lacks the
/// tensors' dtype.
void gemm_with(const std::string& backend, Tensor& c, const Tensor& a, bool trans_a,
               const Tensor& b, bool trans_b, double alpha = 1.0, double beta = 0.0);

/// Whether `backend` ("auto": default_gemm_backend(device)) has a mixed GEMM for C, A and B of
/// these dtypes (each float32, bfloat16 or float16, not all float32) and, with `bias`, its
/// epilogue.
bool gemm_takes_mixed(const std::string& backend, Device device, DType c, DType a, DType b,
                      bool bias);

/// The mixed GEMM (GemmMixedCall) through a named backend ("auto" too): c, a, b each float32,
/// bfloat16 or float16 on one device; `bias` undefined or float32 [n]. For the built-in kernels
/// (warptile on a GPU, reference on the CPU) the bits are those of widening the 16-bit operands to
/// float32, the backend's float32 GEMM, bias_add and a cast to c's dtype. Checks as gemm_with;
/// ValueError when the backend has no mixed GEMM for these dtypes, naming those that have.
void gemm_mixed_with(const std::string& backend, Tensor& c, const Tensor& a, bool trans_a,
                     const Tensor& b, bool trans_b, double alpha = 1.0, double beta = 0.0,
                     const Tensor& bias = Tensor());

}  // namespace minitrain

/// Registers a backend from a user's translation unit at static-initialisation time:
///   MINITRAIN_REGISTER_GEMM(my_sgemm, minitrain::GemmBackend{"my_sgemm", DeviceType::CUDA, "...",
///   false, &f, {}});
/// Put it in the executable's own sources (a static library's unreferenced object is dropped by the
/// linker).
#define MINITRAIN_REGISTER_GEMM(id, ...)                       \
  namespace {                                                  \
  const bool minitrain_gemm_registered_##id =                  \
      (::minitrain::register_gemm_backend(__VA_ARGS__), true); \
  }
