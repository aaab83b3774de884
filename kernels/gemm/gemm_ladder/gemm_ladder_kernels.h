#pragma once
// The ladder's launchers, one per row of gemm_ladder_rungs.h (each defined in its NN_name.cu).
// Each runs C = alpha * op(A) op(B) + beta * C for m, n >= 1, k >= 0 on `stream` and the current
// CUDA device; the registry entries in gemm_ladder.cu validate arguments and pick the device and
// stream.

#include "kernels/gemm/gemm_ladder/gemm_ladder_rungs.h"
#include "kernels/gemm/gemm_ladder/gemm_mixed.h"
#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

struct CUstream_st;

namespace minitrain::gemm_ladder {

#define MINITRAIN_GEMM_LADDER_DECLARE(name, launcher, reduced, technique) \
  void launcher(const GemmArgs& g, CUstream_st* stream);
MINITRAIN_GEMM_LADDER_RUNGS(MINITRAIN_GEMM_LADDER_DECLARE)
#undef MINITRAIN_GEMM_LADDER_DECLARE

/// warptile with mixed precision's operands (gemm_mixed.h): each of A, B, C float32, bfloat16 or
/// float16, the bits of the float32 kernel on widened copies, C rounded once (08_warptile.cu).
void gemm_warptile_mixed_cuda(const GemmMixedArgs& g, CUstream_st* stream);

}  // namespace minitrain::gemm_ladder
