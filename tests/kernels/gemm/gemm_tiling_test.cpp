// The GEMM ladder's tile geometry (kernels/gemm/gemm_ladder/gemm_tiling.h), checked on the CPU with
// the very functions the kernels call: for every variant and odd shapes the blocks' threads cover
// each C element exactly once and never stray outside their tile, the tile loads read each operand
// element once in coalesced order, and op(A)/op(B) indexing plus the epilogue give a correct GEMM.

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/gemm/gemm_ladder/gemm_tiling.h"
#include "tests/support/test_util.h"

namespace minitrain::gemm_ladder {
namespace {

struct Shape2 {
  int64_t m, n;
};
// Odd shapes hit every tail: 1x1, one row, one column, one past and one short of a tile.
const Shape2 kShapes[] = {{1, 1},     {17, 33},   {1000, 1},  {1, 1000},
                          {129, 127}, {128, 128}, {300, 257}, {65, 63}};

template <class Tiling>
class GemmTiling : public ::testing::Test {};

using Tilings = ::testing::Types<NaiveTiling, CoalescedTiling, SmemTiledTiling, Blocktile1dTiling,
                                 Blocktile2dTiling, WarptileTiling, TensorCoreTiling>;
struct TilingName {
  template <class T>
  static std::string GetName(int i) {
    static const char* const names[] = {"naive",        "coalesced", "smem_tiled", "blocktile_1d",
                                        "blocktile_2d", "warptile",  "tensor_core"};
    return names[i];
  }
};
TYPED_TEST_SUITE(GemmTiling, Tilings, TilingName);

TYPED_TEST(GemmTiling, ThreadsCoverTheBlockTileExactlyOnce) {
  using T = TypeParam;
  std::vector<int> hits(T::kBlockM * T::kBlockN, 0);
  for (int tid = 0; tid < T::kThreads; ++tid)
    for (int i = 0; i < T::kRowsPerThread; ++i)
      for (int j = 0; j < T::kColsPerThread; ++j) {
        const int r = T::local_row(tid, i), c = T::local_col(tid, j);
        ASSERT_TRUE(r >= 0 && r < T::kBlockM && c >= 0 && c < T::kBlockN)
            << "thread " << tid << " element (" << i << ", " << j << ") at (" << r << ", " << c
            << ")";
        ++hits[r * T::kBlockN + c];
      }
  for (int e = 0; e < T::kBlockM * T::kBlockN; ++e)
    ASSERT_EQ(hits[e], 1) << "tile element (" << e / T::kBlockN << ", " << e % T::kBlockN << ")";
  EXPECT_LE(T::kThreads, 1024);
  EXPECT_EQ(T::kThreads % 32, 0);
}

TYPED_TEST(GemmTiling, GridCoversCExactlyOnceAndGuardedStoresStayInside) {
  using T = TypeParam;
  for (const Shape2 s : kShapes) {
    SCOPED_TRACE(::testing::Message() << "C [" << s.m << ", " << s.n << "]");
    const GridSize grid = grid_for_shape<T>(s.m, s.n);
    std::vector<int> hits(static_cast<size_t>(s.m * s.n), 0);
    for (int64_t by = 0; by < grid.y; ++by)
      for (int64_t bx = 0; bx < grid.x; ++bx) {
        int64_t owned = 0;
        const int64_t r0 = block_row0<T>(bx, by), c0 = block_col0<T>(bx, by);
        for (int tid = 0; tid < T::kThreads; ++tid)
          for (int i = 0; i < T::kRowsPerThread; ++i)
            for (int j = 0; j < T::kColsPerThread; ++j) {
              const int64_t row = r0 + T::local_row(tid, i), col = c0 + T::local_col(tid, j);
              if (!in_c(row, col, s.m, s.n)) continue;
              ASSERT_TRUE(row >= 0 && col >= 0);
              ++hits[static_cast<size_t>(row * s.n + col)];
              ++owned;
            }
        ASSERT_GT(owned, 0) << "block (" << bx << ", " << by
                            << ") owns nothing: the grid is too large";
      }
    for (int64_t e = 0; e < s.m * s.n; ++e)
      ASSERT_EQ(hits[static_cast<size_t>(e)], 1) << "C element " << e;
  }
}

// Every element of an operand tile is loaded once, and consecutive threads read consecutive
// addresses of the stored matrix (the coalescing the kernels rely on).
void check_scalar_load(int rows, int cols, int threads, bool trans) {
  SCOPED_TRACE(::testing::Message()
               << rows << " x " << cols << " tile, " << threads << " threads, trans " << trans);
  ASSERT_EQ(rows * cols % threads, 0);
  std::vector<int> hits(static_cast<size_t>(rows * cols), 0);
  const int64_t ld = 1000;  // stored row length of the whole matrix
  for (int step = 0; step < rows * cols / threads; ++step)
    for (int tid = 0; tid < threads; ++tid) {
      const TileCoord t = scalar_load_coord(step * threads + tid, rows, cols, trans);
      ASSERT_TRUE(t.r >= 0 && t.r < rows && t.c >= 0 && t.c < cols);
      ++hits[static_cast<size_t>(t.r * cols + t.c)];
      if (tid % 32 != 0) {  // within a warp: the next stored address
        const TileCoord p = scalar_load_coord(step * threads + tid - 1, rows, cols, trans);
        const Operand x{nullptr, ld, rows, cols, trans};
        const bool run_continues = trans ? t.r != 0 : t.c != 0;
        if (run_continues) {
          ASSERT_EQ(x.offset(t.r, t.c), x.offset(p.r, p.c) + 1) << "thread " << tid;
        }
      }
    }
  for (int e = 0; e < rows * cols; ++e)
    ASSERT_EQ(hits[static_cast<size_t>(e)], 1) << "tile element " << e;
}

void check_vec4_load(int rows, int cols, int threads, bool trans) {
  SCOPED_TRACE(::testing::Message() << rows << " x " << cols << " tile (float4), " << threads
                                    << " threads, trans " << trans);
  ASSERT_EQ(rows * cols / 4 % threads, 0);
  std::vector<int> hits(static_cast<size_t>(rows * cols), 0);
  for (int step = 0; step < rows * cols / 4 / threads; ++step)
    for (int tid = 0; tid < threads; ++tid) {
      const TileCoord t = vec4_load_coord(step * threads + tid, rows, cols, trans);
      ASSERT_EQ((trans ? t.r : t.c) % 4, 0) << "a group must start 16-byte aligned";
      for (int e = 0; e < 4; ++e) {
        const int r = t.r + (trans ? e : 0), c = t.c + (trans ? 0 : e);
        ASSERT_TRUE(r < rows && c < cols) << "group of thread " << tid << " leaves the tile";
        ++hits[static_cast<size_t>(r * cols + c)];
      }
    }
  for (int e = 0; e < rows * cols; ++e)
    ASSERT_EQ(hits[static_cast<size_t>(e)], 1) << "tile element " << e;
}

TYPED_TEST(GemmTiling, TileLoadsReadEachOperandElementOnceCoalesced) {
  using T = TypeParam;
  if (T::kBlockK == 1) GTEST_SKIP() << "this variant reads operands straight from global memory";
  for (bool trans : {false, true}) {
    check_scalar_load(T::kBlockM, T::kBlockK, T::kThreads, trans);  // op(A) tile
    check_scalar_load(T::kBlockK, T::kBlockN, T::kThreads, trans);  // op(B) tile
  }
}

TEST(GemmTileLoad, Vec4GroupsCoverTheVectorizedAndWarptileTiles) {
  for (bool trans : {false, true}) {
    check_vec4_load(VectorizedTiling::kBlockM, VectorizedTiling::kBlockK,
                    VectorizedTiling::kThreads, trans);
    check_vec4_load(VectorizedTiling::kBlockK, VectorizedTiling::kBlockN,
                    VectorizedTiling::kThreads, trans);
    check_vec4_load(WarptileTiling::kBlockM, WarptileTiling::kBlockK, WarptileTiling::kThreads,
                    trans);
    check_vec4_load(WarptileTiling::kBlockK, WarptileTiling::kBlockN, WarptileTiling::kThreads,
                    trans);
  }
}

TEST(GemmOperand, TransposedStorageAndZeroFillOutside) {
  // A stored [2, 3] = [[1 2 3], [4 5 6]]; op(A) = A^T is [3, 2].
  const float a[] = {1, 2, 3, 4, 5, 6};
  const Operand plain = operand_a(a, false, 2, 3), trans = operand_a(a, true, 3, 2);
  EXPECT_EQ(plain.ld, 3);
  EXPECT_EQ(trans.ld, 3);
  EXPECT_EQ(plain.at(1, 2), 6.f);
  EXPECT_EQ(trans.at(2, 1), 6.f);
  EXPECT_EQ(trans.at(1, 0), 2.f);
  EXPECT_EQ(trans.at_or_zero(3, 0), 0.f);
  EXPECT_EQ(plain.at_or_zero(0, 3), 0.f);
  const Operand b = operand_b(a, true, 3, 2);  // B stored [2, 3] is op(B) = B^T, [3, 2]
  EXPECT_EQ(b.ld, 3);
  EXPECT_EQ(b.at(2, 0), 3.f);
}

// The naive kernel's body run on the CPU over its own grid: operand indexing, the epilogue
// and the geometry together give C = alpha op(A) op(B) + beta C for all four transposes, and
// beta == 0 ignores NaN in C. Small integers make the float32 sums exact.
TEST(GemmOperand, KernelBodyOnTheCpuMatchesATripleLoop) {
  const int64_t m = 17, n = 33, k = 65;
  const std::vector<float> a = testing::random_small_ints(m * k, 1, -3, 3);
  const std::vector<float> b = testing::random_small_ints(k * n, 2, -3, 3);
  const std::vector<float> c0 = testing::random_small_ints(m * n, 3, -3, 3);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (float beta : {0.f, 0.5f}) {
        SCOPED_TRACE(::testing::Message()
                     << "trans_a " << ta << " trans_b " << tb << " beta " << beta);
        std::vector<float> c(c0);
        if (beta == 0.f) c.assign(c.size(), std::numeric_limits<float>::quiet_NaN());
        const GemmArgs g{c.data(),
                         operand_a(a.data(), ta, m, k),
                         operand_b(b.data(), tb, k, n),
                         m,
                         n,
                         k,
                         2.f,
                         beta,
                         false,
                         false};
        using T = NaiveTiling;
        const GridSize grid = grid_for_shape<T>(m, n);
        for (int64_t by = 0; by < grid.y; ++by)
          for (int64_t bx = 0; bx < grid.x; ++bx)
            for (int tid = 0; tid < T::kThreads; ++tid) {
              const int64_t row = block_row0<T>(bx, by) + T::local_row(tid, 0);
              const int64_t col = block_col0<T>(bx, by) + T::local_col(tid, 0);
              if (!in_c(row, col, m, n)) continue;
              float acc = 0;
              for (int64_t q = 0; q < k; ++q) acc += g.a.at(row, q) * g.b.at(q, col);
              store_c(g.c, n, row, col, acc, g.alpha, g.beta);
            }
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double want = 0;
            for (int64_t q = 0; q < k; ++q)
              want += double(ta ? a[q * m + i] : a[i * k + q]) *
                      double(tb ? b[j * k + q] : b[q * n + j]);
            want = 2 * want + (beta == 0.f ? 0.0 : beta * c0[i * n + j]);
            ASSERT_EQ(c[i * n + j], static_cast<float>(want)) << "C(" << i << ", " << j << ")";
          }
      }
}

}  // namespace
}  // namespace minitrain::gemm_ladder
