#pragma once
// Global -> shared copies of one operand tile, shared by the shared-memory variants of the ladder.
// A block copies the ROWS x COLS tile of op(X) at (r0, c0) into shared memory, zero-filling
// whatever hangs over X's edge, so the inner loops never test bounds. The element order comes from
// gemm_tiling.h (tested on the CPU): consecutive threads read consecutive addresses for either
// transpose. SMEM_T stores the tile transposed ([COLS][ld]): the vectorized kernels want op(A)
// k-major so that a thread's column of A values is contiguous in shared memory.

#include <cuda_runtime.h>

#include "kernels/gemm/gemm_ladder/gemm_tiling.h"

namespace minitrain::gemm_ladder {

struct NoConvert {
  __device__ __forceinline__ float operator()(float v) const { return v; }
};

template <bool SMEM_T>
__device__ __forceinline__ int smem_index(int r, int c, int ld_s) {
  return SMEM_T ? c * ld_s + r : r * ld_s + c;
}

/// One element per thread per step, coalesced along the stored contiguous dimension. X is an
/// Operand, or a MixedOperand (gemm_mixed.h) whose 16-bit elements are read widened.
template <int ROWS, int COLS, int THREADS, bool SMEM_T, typename SmemT,
          typename Convert = NoConvert, typename X = Operand>
__device__ __forceinline__ void load_tile(SmemT* s, int ld_s, const X& x, int64_t r0, int64_t c0,
                                          int tid, Convert convert = Convert()) {
  static_assert((ROWS * COLS) % THREADS == 0, "every thread copies the same number of elements");
#pragma unroll
  for (int step = 0; step < ROWS * COLS / THREADS; ++step) {
    const TileCoord t = scalar_load_coord(step * THREADS + tid, ROWS, COLS, x.trans);
    s[smem_index<SMEM_T>(t.r, t.c, ld_s)] = convert(x.at_or_zero(r0 + t.r, c0 + t.c));
  }
}

/// Four consecutive stored floats per thread per step as one 16-byte load: a quarter of the load
/// instructions of load_tile. Legal only where x's rows start on 16-byte boundaries (the caller
/// checks the pointer and ld % 4 == 0 on the host); a group that crosses the matrix edge falls
/// back to guarded scalar loads.
template <int ROWS, int COLS, int THREADS, bool SMEM_T>
__device__ __forceinline__ void load_tile_vec4(float* s, int ld_s, const Operand& x, int64_t r0,
                                               int64_t c0, int tid) {
  static_assert(ROWS % 4 == 0 && COLS % 4 == 0, "both tile sides hold whole groups of 4");
  static_assert((ROWS * COLS / 4) % THREADS == 0, "every thread copies the same number of groups");
#pragma unroll
  for (int step = 0; step < ROWS * COLS / 4 / THREADS; ++step) {
    const TileCoord t = vec4_load_coord(step * THREADS + tid, ROWS, COLS, x.trans);
    const int64_t gr = r0 + t.r, gc = c0 + t.c;
    // The group runs down op(X)'s rows when X is stored transposed, along its columns otherwise.
    const int dr = x.trans ? 1 : 0, dc = x.trans ? 0 : 1;
    const bool whole =
        x.trans ? (gc < x.cols && gr + 3 < x.rows) : (gr < x.rows && gc + 3 < x.cols);
    float v[4];
    if (whole) {
      const float4 f = *reinterpret_cast<const float4*>(x.p + x.offset(gr, gc));
      v[0] = f.x, v[1] = f.y, v[2] = f.z, v[3] = f.w;
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) v[e] = x.at_or_zero(gr + e * dr, gc + e * dc);
    }
    if (SMEM_T == x.trans) {
      // The group lies along a shared-memory row: one 16-byte store (ld_s and t are multiples of
      // 4).
      *reinterpret_cast<float4*>(&s[smem_index<SMEM_T>(t.r, t.c, ld_s)]) =
          make_float4(v[0], v[1], v[2], v[3]);
    } else {
#pragma unroll
      for (int e = 0; e < 4; ++e) s[smem_index<SMEM_T>(t.r + e * dr, t.c + e * dc, ld_s)] = v[e];
    }
  }
}

}  // namespace minitrain::gemm_ladder
