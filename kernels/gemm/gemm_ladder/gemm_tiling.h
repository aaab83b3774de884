#pragma once
// Tile geometry of the GEMM ladder: which C elements a block, a warp and a thread own, how a
// block's grid is sized for a shape, and in which order a block's threads load an operand tile.
// Plain C++ with MT_HOST_DEVICE, so the kernels use these very functions and a CPU test checks,
// for every variant and odd shapes, that the tiles cover C exactly once and stay inside it.
//
// Conventions: row-major C[m, n] = alpha * op(A)[m, k] op(B)[k, n] + beta * C. A tiling's C tile
// per block is kBlockM x kBlockN; a thread owns the Cartesian product of kRowsPerThread rows
// (local_row(tid, i)) and kColsPerThread columns (local_col(tid, j)) inside its block's tile.
// Blocks walk column tiles on grid x and row tiles on grid y (x allows 2^31 - 1 blocks, y only
// 65535), except the naive kernel, which puts row tiles on x to keep its deliberately
// uncoalesced thread order.

#include <cstdint>

#include "core/host_device.h"

namespace minitrain::gemm_ladder {

MT_HOST_DEVICE int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// op(X) of a row-major stored matrix: `trans` means X is stored [cols][rows] with leading
/// dimension `ld`, so consecutive memory runs along op(X)'s rows instead of its columns.
struct Operand {
  const float* p;
  int64_t ld;
  int64_t rows, cols;
  bool trans;

  MT_HOST_DEVICE int64_t offset(int64_t r, int64_t c) const {
    return trans ? c * ld + r : r * ld + c;
  }
  MT_HOST_DEVICE float at(int64_t r, int64_t c) const { return p[offset(r, c)]; }
  /// Tiles hang over the matrix edge: loads there read zero, which adds nothing to the sums.
  MT_HOST_DEVICE float at_or_zero(int64_t r, int64_t c) const {
    return (r < rows && c < cols) ? p[offset(r, c)] : 0.f;
  }
};

/// op(A) is [m, k]: A is stored [m, k] (ld k), or [k, m] (ld m) when transposed.
MT_HOST_DEVICE Operand operand_a(const float* a, bool trans_a, int64_t m, int64_t k) {
  return Operand{a, trans_a ? m : k, m, k, trans_a};
}
/// op(B) is [k, n]: B is stored [k, n] (ld n), or [n, k] (ld k) when transposed.
MT_HOST_DEVICE Operand operand_b(const float* b, bool trans_b, int64_t k, int64_t n) {
  return Operand{b, trans_b ? k : n, k, n, trans_b};
}

/// Everything a ladder kernel needs, passed by value as the kernel's one argument.
struct GemmArgs {
  float* c;
  Operand a, b;
  int64_t m, n, k;
  float alpha, beta;
  bool vec_a, vec_b;  ///< rows of A / B start on 16-byte boundaries: float4 loads are legal
};

MT_HOST_DEVICE bool in_c(int64_t row, int64_t col, int64_t m, int64_t n) {
  return row < m && col < n;
}

/// The epilogue every variant shares. beta == 0 never reads C, so NaN or garbage there is ignored
/// (BLAS semantics).
MT_HOST_DEVICE void store_c(float* c, int64_t n, int64_t row, int64_t col, float acc, float alpha,
                            float beta) {
  float* p = c + row * n + col;
  *p = beta == 0.f ? alpha * acc : alpha * acc + beta * *p;
}

// ---- operand tile loads ----

struct TileCoord {
  int r, c;
};

/// Element `idx` of a rows x cols tile in load order: consecutive idx (consecutive threads) walk
/// the stored contiguous dimension, so a warp's global loads coalesce for either transpose.
MT_HOST_DEVICE TileCoord scalar_load_coord(int idx, int rows, int cols, bool trans) {
  return trans ? TileCoord{idx % rows, idx / rows} : TileCoord{idx / cols, idx % cols};
}

/// Group `idx` of 4 consecutive stored elements: (r..r+3, c) when trans, (r, c..c+3) otherwise.
/// Needs the contiguous tile dimension to be a multiple of 4.
MT_HOST_DEVICE TileCoord vec4_load_coord(int idx, int rows, int cols, bool trans) {
  return trans ? TileCoord{(idx % (rows / 4)) * 4, idx / (rows / 4)}
               : TileCoord{idx / (cols / 4), (idx % (cols / 4)) * 4};
}

// ---- the tilings, one per ladder variant ----

/// One thread per C element, consecutive threads on consecutive ROWS: a warp reads 32 rows of A
/// at a stride of k floats and writes C at a stride of n, so nothing coalesces.
struct NaiveTiling {
  static constexpr int kThreads = 256;
  static constexpr int kBlockM = 16, kBlockN = 16, kBlockK = 1;
  static constexpr int kRowsPerThread = 1, kColsPerThread = 1;
  static constexpr bool kRowTilesOnX = true;
  MT_HOST_DEVICE static int local_row(int tid, int) { return tid % kBlockM; }
  MT_HOST_DEVICE static int local_col(int tid, int) { return tid / kBlockM; }
};

/// One thread per C element, a warp on 32 consecutive columns of one row: B and C coalesce, A is
/// one broadcast value per warp.
struct CoalescedTiling {
  static constexpr int kThreads = 256;
  static constexpr int kBlockM = 8, kBlockN = 32, kBlockK = 1;
  static constexpr int kRowsPerThread = 1, kColsPerThread = 1;
  static constexpr bool kRowTilesOnX = false;
  MT_HOST_DEVICE static int local_row(int tid, int) { return tid / kBlockN; }
  MT_HOST_DEVICE static int local_col(int tid, int) { return tid % kBlockN; }
};

/// 32 x 32 C tile, one element per thread, A and B staged through 32 x 32 shared tiles.
struct SmemTiledTiling {
  static constexpr int kThreads = 1024;
  static constexpr int kBlockM = 32, kBlockN = 32, kBlockK = 32;
  static constexpr int kRowsPerThread = 1, kColsPerThread = 1;
  static constexpr bool kRowTilesOnX = false;
  MT_HOST_DEVICE static int local_row(int tid, int) { return tid / kBlockN; }
  MT_HOST_DEVICE static int local_col(int tid, int) { return tid % kBlockN; }
};

/// 64 x 64 C tile; each thread a column strip of kTM results, so one B value from shared memory
/// feeds kTM multiply-adds.
struct Blocktile1dTiling {
  static constexpr int kTM = 8;
  static constexpr int kBlockM = 64, kBlockN = 64, kBlockK = 8;
  static constexpr int kThreads = kBlockM * kBlockN / kTM;  // 512
  static constexpr int kRowsPerThread = kTM, kColsPerThread = 1;
  static constexpr bool kRowTilesOnX = false;
  MT_HOST_DEVICE static int local_row(int tid, int i) { return (tid / kBlockN) * kTM + i; }
  MT_HOST_DEVICE static int local_col(int tid, int) { return tid % kBlockN; }
};

/// 128 x 128 C tile; each thread a kTM x kTN register tile (an outer product per k step: kTM + kTN
/// shared loads feed kTM * kTN multiply-adds). The vectorized variant uses the same geometry.
struct Blocktile2dTiling {
  static constexpr int kTM = 8, kTN = 8;
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 8;
  static constexpr int kThreads = kBlockM * kBlockN / (kTM * kTN);  // 256
  static constexpr int kRowsPerThread = kTM, kColsPerThread = kTN;
  static constexpr bool kRowTilesOnX = false;
  MT_HOST_DEVICE static int local_row(int tid, int i) { return (tid / (kBlockN / kTN)) * kTM + i; }
  MT_HOST_DEVICE static int local_col(int tid, int j) { return (tid % (kBlockN / kTN)) * kTN + j; }
};
using VectorizedTiling = Blocktile2dTiling;

/// 128 x 128 C tile split into 2 x 4 warp tiles of 64 x 32; a warp tile is swept in kWNIter
/// sub-tiles of 64 x 16, each covered by the warp's 32 threads as an 8 x 4 grid of 8 x 4 thread
/// tiles. A thread so owns kWMIter * kTM rows by kWNIter * kTN columns of its warp's tile.
struct WarptileTiling {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 16;
  static constexpr int kWarpM = 64, kWarpN = 32;
  static constexpr int kWMIter = 1, kWNIter = 2;
  static constexpr int kTM = 8, kTN = 4;
  static constexpr int kSubM = kWarpM / kWMIter, kSubN = kWarpN / kWNIter;  // 64 x 16
  static constexpr int kWarpsN = kBlockN / kWarpN;                          // 4
  static constexpr int kThreads = 32 * (kBlockM / kWarpM) * kWarpsN;        // 256
  static constexpr int kRowsPerThread = kWMIter * kTM, kColsPerThread = kWNIter * kTN;
  static constexpr bool kRowTilesOnX = false;
  static_assert((kSubM / kTM) * (kSubN / kTN) == 32, "a warp's threads must tile one sub-tile");
  MT_HOST_DEVICE static int local_row(int tid, int i) {
    const int warp = tid / 32, lane = tid % 32;
    return (warp / kWarpsN) * kWarpM + (i / kTM) * kSubM + (lane / (kSubN / kTN)) * kTM + i % kTM;
  }
  MT_HOST_DEVICE static int local_col(int tid, int j) {
    const int warp = tid / 32, lane = tid % 32;
    return (warp % kWarpsN) * kWarpN + (j / kTN) * kSubN + (lane % (kSubN / kTN)) * kTN + j % kTN;
  }
};

/// 128 x 128 C tile split into 2 x 4 warp tiles of 64 x 32, each kFragM x kFragN WMMA 16 x 16
/// accumulator fragments. The epilogue stages one fragment at a time through shared memory; there
/// lane l writes column l % 16 of rows l / 16, l / 16 + 2, ... (8 rows), so a half-warp writes 16
/// consecutive floats of one C row. Row index i = fragment row * 8 + e, column index j = fragment
/// column.
struct TensorCoreTiling {
  static constexpr int kBlockM = 128, kBlockN = 128, kBlockK = 16;
  static constexpr int kWarpM = 64, kWarpN = 32, kFrag = 16;
  static constexpr int kFragM = kWarpM / kFrag, kFragN = kWarpN / kFrag;  // 4 x 2
  static constexpr int kWarpsN = kBlockN / kWarpN;                        // 4
  static constexpr int kThreads = 32 * (kBlockM / kWarpM) * kWarpsN;      // 256
  static constexpr int kRowsPerLanePerFrag = kFrag * kFrag / 32;  // 8 elements a lane per fragment
  static constexpr int kRowsPerThread = kFragM * kRowsPerLanePerFrag, kColsPerThread = kFragN;
  static constexpr bool kRowTilesOnX = false;
  /// Position of lane `lane`'s element `e` inside a 16 x 16 fragment.
  MT_HOST_DEVICE static int frag_row(int lane, int e) { return lane / kFrag + 2 * e; }
  MT_HOST_DEVICE static int frag_col(int lane) { return lane % kFrag; }
  MT_HOST_DEVICE static int local_row(int tid, int i) {
    const int warp = tid / 32, lane = tid % 32;
    return (warp / kWarpsN) * kWarpM + (i / kRowsPerLanePerFrag) * kFrag +
           frag_row(lane, i % kRowsPerLanePerFrag);
  }
  MT_HOST_DEVICE static int local_col(int tid, int j) {
    const int warp = tid / 32, lane = tid % 32;
    return (warp % kWarpsN) * kWarpN + j * kFrag + frag_col(lane);
  }
};

// ---- block placement and grid size, the same for every tiling ----

template <class Tiling>
MT_HOST_DEVICE int64_t block_row0(int64_t bx, int64_t by) {
  return (Tiling::kRowTilesOnX ? bx : by) * Tiling::kBlockM;
}
template <class Tiling>
MT_HOST_DEVICE int64_t block_col0(int64_t bx, int64_t by) {
  return (Tiling::kRowTilesOnX ? by : bx) * Tiling::kBlockN;
}

struct GridSize {
  int64_t x, y;
};
/// Blocks needed for an m x n C (m, n >= 1).
template <class Tiling>
GridSize grid_for_shape(int64_t m, int64_t n) {
  const int64_t row_tiles = ceil_div(m, Tiling::kBlockM), col_tiles = ceil_div(n, Tiling::kBlockN);
  return Tiling::kRowTilesOnX ? GridSize{row_tiles, col_tiles} : GridSize{col_tiles, row_tiles};
}

}  // namespace minitrain::gemm_ladder
