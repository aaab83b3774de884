#pragma once
// The hand-written CUDA GEMM ladder, one technique per file in this folder (NN_name.cu, in ladder
// order), from the naive kernel to warp tiling and tensor cores. Each rung is a registry entry
// (kernels/gemm/gemm_registry.h); kernels/gemm/gemm_registry.cpp adds them in CUDA builds.
// Defined in gemm_ladder.cu (CUDA builds only).
#include <vector>

#include "kernels/gemm/gemm_registry.h"

namespace minitrain {

/// The ladder's backends in the order of gemm_ladder_rungs.h (README.md in this folder).
std::vector<GemmBackend> cuda_gemm_ladder_backends();

}  // namespace minitrain
