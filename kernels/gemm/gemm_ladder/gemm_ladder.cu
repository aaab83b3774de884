// The ladder as registry entries: each wraps one launcher in the GemmFloatFn signature, checking
// the device and sizes on the host and launching on the calling thread's current stream.

#include "kernels/gemm/gemm_ladder/gemm_ladder.h"

#include <cstdint>

#include "core/error.h"
#include "core/stream.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"

namespace minitrain {

namespace {

using Launcher = void (*)(const gemm_ladder::GemmArgs&, CUstream_st*);

// float4 loads of op(X)'s stored rows need every row to start on a 16-byte boundary.
bool rows_16b_aligned(const float* p, int64_t ld) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0 && ld % 4 == 0;
}

gemm_ladder::Elem elem_of(DType t) {
  return t == DType::BFloat16  ? gemm_ladder::Elem::BFloat16
         : t == DType::Float16 ? gemm_ladder::Elem::Float16
                               : gemm_ladder::Elem::Float32;
}

// warptile on mixed precision's operands (gemm_registry.h's GemmMixedCall; the registry checked
// the tensors). float4 loads only for a float32 operand whose rows are 16-byte aligned.
void warptile_mixed(Device device, const GemmMixedCall& call) {
  MT_CHECK_AS(DeviceError, device.is_cuda(), "gemm backend 'warptile' runs on CUDA devices, got ",
              device.str(), "; move the tensors to a GPU or pick a CPU backend (reference)");
  if (call.m == 0 || call.n == 0) return;
  gemm_ladder::GemmMixedArgs g{};
  g.c = call.c;
  g.c_elem = elem_of(call.c_dtype);
  g.a = gemm_ladder::mixed_operand_a(call.a, elem_of(call.a_dtype), call.trans_a, call.m, call.k);
  g.b = gemm_ladder::mixed_operand_b(call.b, elem_of(call.b_dtype), call.trans_b, call.k, call.n);
  g.bias = call.bias;
  g.m = call.m, g.n = call.n, g.k = call.k;
  g.alpha = call.alpha, g.beta = call.beta;
  g.vec_a =
      call.a_dtype == DType::Float32 && rows_16b_aligned(static_cast<const float*>(call.a), g.a.ld);
  g.vec_b =
      call.b_dtype == DType::Float32 && rows_16b_aligned(static_cast<const float*>(call.b), g.b.ld);
  DeviceGuard guard(device);
  gemm_ladder::gemm_warptile_mixed_cuda(g, current_stream(device).native_handle());
}

GemmBackend ladder_entry(const char* name, const char* technique, bool reduced_precision,
                         Launcher launch) {
  const std::string backend = name;
  GemmFloatFn fn = [backend, launch](Device device, float* c, const float* a, bool trans_a,
                                     const float* b, bool trans_b, int64_t m, int64_t n, int64_t k,
                                     float alpha, float beta) {
    MT_CHECK_AS(DeviceError, device.is_cuda(), "gemm backend '", backend,
                "' runs on CUDA devices, got ", device.str(),
                "; move the tensors to a GPU or pick a CPU backend (openblas, eigen)");
    MT_CHECK_AS(ValueError, m >= 0 && n >= 0 && k >= 0, "gemm backend '", backend,
                "': sizes must be >= 0, got m = ", m, ", n = ", n, ", k = ", k);
    if (m == 0 || n == 0) return;
    MT_CHECK_AS(ValueError, c != nullptr && (k == 0 || (a != nullptr && b != nullptr)),
                "gemm backend '", backend,
                "': null pointer for a non-empty product (c = ", static_cast<const void*>(c),
                ", a = ", static_cast<const void*>(a), ", b = ", static_cast<const void*>(b), ")");
    gemm_ladder::GemmArgs g{};
    g.c = c;
    g.a = gemm_ladder::operand_a(a, trans_a, m, k);
    g.b = gemm_ladder::operand_b(b, trans_b, k, n);
    g.m = m, g.n = n, g.k = k;
    g.alpha = alpha, g.beta = beta;
    g.vec_a = rows_16b_aligned(a, g.a.ld);
    g.vec_b = rows_16b_aligned(b, g.b.ld);
    DeviceGuard guard(device);
    launch(g, current_stream(device).native_handle());
  };
  GemmBackend entry{name,          DeviceType::CUDA, technique, reduced_precision,
                    std::move(fn), nullptr,          {}};
  if (std::string(name) == "warptile") {  // the emulated GPUs' default: mixed precision's GEMM
    entry.mixed = [](Device device, const GemmMixedCall& call) { warptile_mixed(device, call); };
    entry.mixed_bias = true;
  }
  // tc_bf16 rounds its operands to bfloat16: float16 values would lose 3 mantissa bits. (tc_tf32
  // keeps 10, which holds both 16-bit types exactly.)
  if (std::string(name) == "tc_bf16") entry.precisions = {DType::Float32, DType::BFloat16};
  return entry;
}

}  // namespace

std::vector<GemmBackend> cuda_gemm_ladder_backends() {
  using namespace gemm_ladder;
#define MINITRAIN_GEMM_LADDER_ENTRY(name, launcher, reduced, technique) \
  ladder_entry(#name, technique, reduced, &launcher),
  return {MINITRAIN_GEMM_LADDER_RUNGS(MINITRAIN_GEMM_LADDER_ENTRY)};
#undef MINITRAIN_GEMM_LADDER_ENTRY
}

}  // namespace minitrain
