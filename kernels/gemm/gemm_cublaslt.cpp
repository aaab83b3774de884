// GEMM and the fused Linear forward through cuBLASLt (CUDA builds only). Same row-major mapping
// as gemm_cublas.cpp: row-major C[m, n] is column-major C^T[n, m] = op(B)^T op(A)^T, so B is
// cuBLASLt's first operand and the bias (one value per column of row-major C, per output
// feature) is one value per row of column-major D, which is what CUBLASLT_EPILOGUE_BIAS adds.
// Compute-bound at large sizes; at a trainer's small shapes the saved bias/activation passes and
// launches are what the fusion buys. Note [cuBLASLt plans] in gemm_cublaslt.h.

#include "kernels/gemm/gemm_cublaslt.h"

#include <cstdint>
#include <map>
#include <tuple>

#include "core/blas_handle.h"
#include "core/cuda_check.h"
#include "core/error.h"
#include "core/stream.h"
#include "kernels/activation.h"
#include "kernels/bias_add.h"
#include "kernels/check.h"
#include "kernels/gemm/gemm.h"
#include "kernels/gemm/gemm_builtin.h"
#include "kernels/gemm/gemm_check.h"
#include "kernels/gemm/gemm_registry.h"

namespace minitrain {

namespace {

// The largest power of two (up to 256, what cuBLASLt's heuristic assumes by default) that divides
// the address: the algorithm chosen must not rely on more alignment than the pointers have.
uint32_t alignment_of(const void* p) {
  const auto addr = reinterpret_cast<std::uintptr_t>(p);
  uint32_t align = 256;
  while (align > 4 && addr % align != 0) align /= 2;
  return align;
}

struct PlanKey {
  int device;
  int64_t m, n, k;
  bool trans_a, trans_b;
  cublasLtEpilogue_t epilogue;
  uint32_t align_a, align_b, align_c, align_bias;
  // Element types (mixed precision: 16-bit A and B, C 16-bit or float32; float32 otherwise).
  cudaDataType_t a_type = CUDA_R_32F, b_type = CUDA_R_32F, c_type = CUDA_R_32F;
  bool operator<(const PlanKey& o) const {
    return std::tie(device, m, n, k, trans_a, trans_b, epilogue, align_a, align_b, align_c,
                    align_bias, a_type, b_type, c_type) <
           std::tie(o.device, o.m, o.n, o.k, o.trans_a, o.trans_b, o.epilogue, o.align_a, o.align_b,
                    o.align_c, o.align_bias, o.a_type, o.b_type, o.c_type);
  }
};

// One matmul's descriptors and algorithm. Host-side objects only: destroying them needs no device.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A, B, C (= D)
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (c) (void)cublasLtMatrixLayoutDestroy(c);
    if (desc) (void)cublasLtMatmulDescDestroy(desc);
  }
};

// Enough for every shape of a training run and a benchmark sweep; past it the table starts over
// rather than growing without bound in a long-lived process that sees ever new shapes.
constexpr std::size_t kMaxPlans = 1024;

std::map<PlanKey, Plan>& thread_plans() {
  thread_local std::map<PlanKey, Plan> plans;
  return plans;
}

cublasOperation_t op(bool trans) { return trans ? CUBLAS_OP_T : CUBLAS_OP_N; }

// Builds the plan for `key` (row-major C[m, n] = op(A) op(B); see the mapping above).
void build_plan(Plan& plan, const PlanKey& key, Device device) {
  const int64_t m = key.m, n = key.n, k = key.k;
  CHECK_CUBLAS(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = op(key.trans_b), op_second = op(key.trans_a);
  CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first,
                                              sizeof(op_first)));
  CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second,
                                              sizeof(op_second)));
  CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                              &key.epilogue, sizeof(key.epilogue)));
  if (key.align_bias != 0 && key.c_type != CUDA_R_32F) {  // a 16-bit D: the bias stays float32
    const cudaDataType_t bias_type = CUDA_R_32F;
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                &bias_type, sizeof(bias_type)));
  }
  // Layouts describe the stored, column-major matrices (before op): row-major B is column-major
  // [n, k] (or [k, n] when transposed), row-major A is [k, m] (or [m, k]), C is [n, m].
  CHECK_CUBLAS(key.trans_b ? cublasLtMatrixLayoutCreate(&plan.a, key.b_type, k, n, k)
                           : cublasLtMatrixLayoutCreate(&plan.a, key.b_type, n, k, n));
  CHECK_CUBLAS(key.trans_a ? cublasLtMatrixLayoutCreate(&plan.b, key.a_type, m, k, m)
                           : cublasLtMatrixLayoutCreate(&plan.b, key.a_type, k, m, k));
  CHECK_CUBLAS(cublasLtMatrixLayoutCreate(&plan.c, key.c_type, n, m, n));

  cublasLtMatmulPreference_t pref = nullptr;
  CHECK_CUBLAS(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { (void)cublasLtMatmulPreferenceDestroy(p); }
  } pref_guard{pref};
  const uint64_t workspace = kCublasLtWorkspaceBytes;
  CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace, sizeof(workspace)));
  // cuBLASLt's A is our B and its B our A (the mapping above).
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
  for (const auto& [attr, bytes] : aligns)
    CHECK_CUBLAS(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  CHECK_CUBLAS(cublasLtMatmulAlgoGetHeuristic(cublaslt_handle(device), plan.desc, plan.a, plan.b,
                                              plan.c, plan.c, pref, 1, &result, &found));
  MT_CHECK_AS(DeviceError, found > 0, "cublaslt: no cuBLASLt algorithm for [m, n, k] = [", m, ", ",
              n, ", ", k, "] (trans_a ", key.trans_a, ", trans_b ", key.trans_b, ", epilogue ",
              int(key.epilogue), ") on ", device, "; use the 'cublas' GEMM backend instead");
  plan.algo = result.algo;
}

// D = epilogue(alpha * op(A) op(B) + beta * C [+ bias]) with D = C, on the current stream.
// Element types a, b, c (float32 unless given).
void lt_matmul(Device device, void* c, const void* a, bool trans_a, const void* b, bool trans_b,
               int64_t m, int64_t n, int64_t k, float alpha, float beta,
               cublasLtEpilogue_t epilogue, const float* bias, cudaDataType_t a_type = CUDA_R_32F,
               cudaDataType_t b_type = CUDA_R_32F, cudaDataType_t c_type = CUDA_R_32F) {
  DeviceGuard guard(device);
  const PlanKey key{device.index(),
                    m,
                    n,
                    k,
                    trans_a,
                    trans_b,
                    epilogue,
                    alignment_of(a),
                    alignment_of(b),
                    alignment_of(c),
                    bias ? alignment_of(bias) : 0,
                    a_type,
                    b_type,
                    c_type};
  std::map<PlanKey, Plan>& plans = thread_plans();
  auto it = plans.find(key);
  if (it == plans.end()) {
    if (plans.size() >= kMaxPlans) plans.clear();
    it = plans.try_emplace(key).first;
    try {
      build_plan(it->second, key, device);
    } catch (...) {
      plans.erase(it);  // never leave a half-built plan behind
      throw;
    }
  }
  Plan& plan = it->second;
  if (bias != nullptr)  // the pointer changes from call to call; the rest of the plan does not
    CHECK_CUBLAS(cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                sizeof(bias)));
  const BlasWorkspace ws = cublaslt_workspace(device);
  CHECK_CUBLAS(cublasLtMatmul(cublaslt_handle(device), plan.desc, &alpha, b, plan.a, a, plan.b,
                              &beta, c, plan.c, c, plan.c, &plan.algo, ws.data, ws.bytes,
                              current_stream(device).native_handle()));
}

cublasLtEpilogue_t epilogue_for(std::optional<Activation> act) {
  if (!act) return CUBLASLT_EPILOGUE_BIAS;
  switch (*act) {
    case Activation::ReLU:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Activation::GELUTanh:
      return CUBLASLT_EPILOGUE_GELU_BIAS;
    default:
      break;
  }
  MT_THROW(ValueError, "linear_forward_cublaslt: cuBLASLt has no fused epilogue for activation '",
           activation_name(*act),
           "' (it has relu and gelu_tanh); run the Linear without it and apply ",
           activation_name(*act), " separately");
}

}  // namespace

void gemm_cublaslt(Device device, float* c, const float* a, bool trans_a, const float* b,
                   bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, float beta) {
  if (m == 0 || n == 0) return;
  // An empty product is beta * C, which gemm_cublas does without asking a library about k = 0.
  if (k == 0) return gemm_cublas<float>(device, c, a, trans_a, b, trans_b, m, n, k, alpha, beta);
  lt_matmul(device, c, a, trans_a, b, trans_b, m, n, k, alpha, beta, CUBLASLT_EPILOGUE_DEFAULT,
            nullptr);
}

void linear_forward_cublaslt(Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                             std::optional<Activation> act) {
  const GemmDims d = check_gemm_operands("linear_forward_cublaslt", y, x, false, w, true);
  MT_CHECK(b.defined(),
           "linear_forward_cublaslt: the bias is an undefined tensor; without a bias "
           "use gemm_with(\"cublaslt\", ...)");
  check_compatible("linear_forward_cublaslt", {{"y", y}, {"b", b}});
  MT_CHECK_AS(ShapeError, b.ndim() == 1 && b.size(0) == d.n, "linear_forward_cublaslt: bias is ",
              b.shape(), " but the layer has ", d.n, " outputs (w ", w.shape(), ")");
  MT_CHECK_AS(DeviceError, y.device().is_cuda(), "linear_forward_cublaslt: tensors are on ",
              y.device(),
              "; cuBLASLt runs on CUDA devices only (use the 'openblas' backend on the CPU)");
  MT_CHECK_AS(DTypeError, y.dtype() == DType::Float32, "linear_forward_cublaslt: tensors are ",
              y.dtype(),
              "; the cuBLASLt path is float32 only (use the 'cublas' backend for float64)");
  const cublasLtEpilogue_t epilogue = epilogue_for(act);
  if (d.m == 0 || d.n == 0) return;
  if (d.k == 0) {  // no product to fuse into: act(0 + b), composed from the separate ops
    gemm_cublas<float>(y.device(), y.data<float>(), x.data<float>(), false, w.data<float>(), true,
                       d.m, d.n, 0, 1.f, 0.f);
    bias_add(y, y, b);
    if (act) activation_forward(y, y, *act);
    return;
  }
  lt_matmul(y.device(), y.data<float>(), x.data<float>(), false, w.data<float>(), true, d.m, d.n,
            d.k, 1.f, 0.f, epilogue, b.data<float>());
}

void gemm_cublaslt_mixed(Device device, const GemmMixedCall& call) {
  if (call.m == 0 || call.n == 0) return;
  MT_CHECK_AS(ValueError, call.k > 0 || call.bias == nullptr,
              "gemm backend 'cublaslt': an empty product (k = 0) with a bias has no matmul to ",
              "fuse into; use the 'warptile' backend");
  lt_matmul(device, call.c, call.a, call.trans_a, call.b, call.trans_b, call.m, call.n, call.k,
            call.alpha, call.beta,
            call.bias != nullptr ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT, call.bias,
            cuda_data_type(call.a_dtype), cuda_data_type(call.b_dtype),
            cuda_data_type(call.c_dtype));
}

GemmBackend cublaslt_gemm_backend() {
  GemmBackend g;
  g.name = "cublaslt";
  g.device = DeviceType::CUDA;
  g.technique = "cuBLASLt cublasLtMatmul, full FP32, cached plans; fuses a Linear's bias epilogue";
  g.float32 = gemm_cublaslt;
  g.mixed = gemm_cublaslt_mixed;
  g.mixed_equal_inputs = true;
  g.mixed_bias = true;
  return g;
}

}  // namespace minitrain
