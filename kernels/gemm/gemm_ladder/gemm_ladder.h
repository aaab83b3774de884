#pragma once
// The hand-written CUDA GEMM ladder, one technique per file in this folder, from the naive kernel
// to warp tiling and tensor cores. Each variant is a registry entry (kernels/gemm/gemm_registry.h);
// kernels/gemm/gemm_registry.cpp adds them in CUDA builds. Defined in gemm_ladder.cu (CUDA builds only).
#include <vector>

#include "kernels/gemm/gemm_registry.h"

namespace minitrain {

/// The ladder's backends in order: naive, coalesced, smem_tiled, blocktile_1d, blocktile_2d,
/// vectorized, warptile, then the tensor-core variants.
std::vector<GemmBackend> cuda_gemm_ladder_backends();

}  // namespace minitrain
