#pragma once
// The GEMM ladder's rungs, declared once, in teaching order. The registry (gemm_ladder.cu), the
// launcher declarations (gemm_ladder_kernels.h) and the tests all expand this one table, so adding
// a rung touches three files: its NN_name.cu, one row here, one source line in
// kernels/CMakeLists.txt. Plain C++ (no CUDA): CPU-only builds read the names too, to name the
// tests they skip.
//
// RUNG(name, launcher, reduced_precision_inputs, technique)
//   name                      registry name (gemm backend), also the test instance name
//   launcher                  void launcher(const GemmArgs&, CUstream_st*) in namespace gemm_ladder
//   reduced_precision_inputs  true where inputs are rounded (TF32/BF16) before the FP32 accumulate
//   technique                 what the rung changes and what bounds it, one line

#define MINITRAIN_GEMM_LADDER_RUNGS(RUNG)                                                        \
  RUNG(naive, gemm_naive_cuda, false,                                                            \
       "one thread per C element, threads along rows: uncoalesced, memory-transaction bound")    \
  RUNG(coalesced, gemm_coalesced_cuda, false,                                                    \
       "one thread per C element, warps along columns: coalesced, global-bandwidth bound")       \
  RUNG(smem_tiled, gemm_smem_tiled_cuda, false,                                                  \
       "32x32 shared-memory tiles: operands reused 32x, shared-memory bandwidth bound")          \
  RUNG(double_buffered, gemm_double_buffered_cuda, false,                                        \
       "smem_tiled with two tile buffers, next tile's loads (cp.async on sm_80+) in flight "     \
       "during compute")                                                                         \
  RUNG(blocktile_1d, gemm_blocktile_1d_cuda, false,                                              \
       "64x64 tiles, 8 results per thread in registers: shared-memory bandwidth bound")          \
  RUNG(blocktile_2d, gemm_blocktile_2d_cuda, false,                                              \
       "128x128 tiles, 8x8 register tile per thread: bound by bank conflicts and issue")         \
  RUNG(vectorized, gemm_vectorized_cuda, false,                                                  \
       "blocktile_2d with float4 loads and k-major A in shared memory: issue/latency bound")     \
  RUNG(warptile, gemm_warptile_cuda, false,                                                      \
       "128x128 block, 64x32 warp tiles, 8x4 thread tiles: FP32 issue-rate bound")               \
  RUNG(tc_tf32, gemm_tc_tf32_cuda, true,                                                         \
       "WMMA tensor cores, TF32 inputs, FP32 accumulate: bound by operand feed (smem, latency)") \
  RUNG(tc_bf16, gemm_tc_bf16_cuda, true,                                                         \
       "WMMA tensor cores, BF16 inputs, FP32 accumulate: bound by operand feed (smem, latency)")

namespace minitrain::gemm_ladder {

#define MINITRAIN_GEMM_LADDER_RUNG_NAME(name, launcher, reduced, technique) #name,
/// The rung names in ladder order (every build, CUDA or not).
inline constexpr const char* kRungNames[] = {
    MINITRAIN_GEMM_LADDER_RUNGS(MINITRAIN_GEMM_LADDER_RUNG_NAME)};
#undef MINITRAIN_GEMM_LADDER_RUNG_NAME

}  // namespace minitrain::gemm_ladder
