#pragma once
// The grid of a ladder kernel for one shape, checked against CUDA's grid limits: row tiles sit on
// grid y (at most 65535 blocks) for all but the naive kernel, so very tall C needs splitting.

#include <cuda_runtime.h>

#include <climits>

#include "core/error.h"
#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

namespace minitrain::gemm_ladder {

template <class Tiling>
dim3 launch_grid(const GemmArgs& g, const char* variant) {
  const GridSize grid = grid_for_shape<Tiling>(g.m, g.n);
  MT_CHECK_AS(ValueError, grid.x <= INT_MAX && grid.y <= 65535, "gemm ", variant, ": C [", g.m,
              ", ", g.n, "] needs a grid of ", grid.x, " x ", grid.y, " blocks of ",
              Tiling::kBlockM, " x ", Tiling::kBlockN, " but CUDA allows at most ", INT_MAX,
              " x 65535; split the product into "
              "smaller ones or use the cublas backend");
  return dim3(static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y));
}

}  // namespace minitrain::gemm_ladder
