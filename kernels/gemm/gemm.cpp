// GEMM entry point and the CPU path. Compute-bound for large shapes (2mnk flops on
// (mk + kn + mn) elements). CPU: OpenBLAS's packed, runtime-dispatched (AVX2/AVX-512) kernels,
// one single-threaded call per tile of C, the tiles spread over minitrain's OpenMP threads.
//
// Note [OpenBLAS on OpenMP threads]: bench/gemm_cpu_bench.cpp chose OpenBLAS over Eigen (2.3-2.6x
// faster on the MLP shapes: Eigen is compiled for baseline x86-64, SSE2, while OpenBLAS picks its
// kernels at run time). Left to its own thread pool, OpenBLAS fights the OpenMP pool that every
// other CPU op uses (both spin-wait on the same cores): a GEMM followed by an OpenMP ReLU ran
// 3-40x slower. So OpenBLAS runs single-threaded and the partitioning is ours, on the one pool;
// alone, that is within 10% of OpenBLAS's own threading.

#include "kernels/gemm/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <mutex>
#include <string>

#include "core/op_profiler.h"
#include "core/parallel_for.h"
#include "kernels/check.h"
#include "kernels/gemm/gemm_check.h"
#include "kernels/gemm/gemm_registry.h"
#include "kernels/gemm/openblas_core.h"
#include "kernels/dispatch.h"

namespace minitrain {

namespace {

// Note [GEMM tiles]: C is cut into a grid of tiles whose sizes depend on the shape only, never
// on the thread count; threads take tiles, and each tile is one single-threaded BLAS call. Every
// element of C thus comes from the same call whatever the thread count and whichever thread
// makes it, so results are bit-identical for any thread count (OpenBLAS's rounding depends on the
// block it is given: a 256x1024 product cut into other tiles differs in its last bits); across
// CPUs they may differ, as OpenBLAS picks other kernels.
// Tiles are at least kTileRows x kTileCols (smaller only where C is), so the operand panels that
// each call packs are amortised over enough flops; at most kMaxTiles^2 of them. A smaller C is
// halved further, down to 32-line tiles of kMinTileFlops, until there are kMinTiles to share.
constexpr int64_t kTileRows = 128, kTileCols = 256, kMaxTiles = 8, kMinTiles = 4;
constexpr double kMinTileFlops = 1e6;  // ~10 us on one core: more than a fork/join costs
// Below this a product runs on the calling thread: ~40 us on one core, so that each of two threads
// saves about what waking one costs with passive waiting.
constexpr double kMinParallelFlops = 4e6;

int64_t ceil_div(int64_t x, int64_t y) { return (x + y - 1) / y; }
int64_t round_up_32(int64_t x) { return (x + 31) / 32 * 32; }  // OpenBLAS's register tiles fit

// The tile extent for `extent` rows (or columns) with tiles at least `min_tile` long: a multiple
// of 32 unless it is the whole extent.
int64_t tile_extent(int64_t extent, int64_t min_tile) {
  const int64_t tiles = std::clamp<int64_t>(extent / min_tile, 1, kMaxTiles);
  return tiles == 1 ? extent : std::min(extent, round_up_32(ceil_div(extent, tiles)));
}

struct Tile {
  int64_t rows, cols;
};

// Note [GEMM tiles]: a function of the shape alone.
Tile gemm_tile(int64_t m, int64_t n, int64_t k) {
  Tile t{tile_extent(m, kTileRows), tile_extent(n, kTileCols)};
  while (ceil_div(m, t.rows) * ceil_div(n, t.cols) < kMinTiles) {
    const bool halve_rows = t.rows >= t.cols;
    int64_t& longer = halve_rows ? t.rows : t.cols;
    const int64_t other = halve_rows ? t.cols : t.rows;
    const int64_t half = round_up_32(longer / 2);  // < longer once longer >= 64
    if (longer < 64 || 2.0 * double(half) * double(other) * double(k) < kMinTileFlops) break;
    longer = half;
  }
  return t;
}

CBLAS_TRANSPOSE blas_op(bool trans) { return trans ? CblasTrans : CblasNoTrans; }

// Row-major BLAS call on a block; every size fits in int (checked by gemm_cpu).
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
               int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, blas_op(ta), blas_op(tb), int(m), int(n), int(k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}
void blas_gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
               int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, blas_op(ta), blas_op(tb), int(m), int(n), int(k), alpha, a, int(lda),
              b, int(ldb), beta, c, int(ldc));
}

// Once per process, before the first call: the kernels for this CPU (Note [OpenBLAS core]), one
// thread each (Note [OpenBLAS on OpenMP threads]).
void prepare_openblas() {
  static std::once_flag once;
  std::call_once(once, [] {
    select_openblas_core();
    openblas_set_num_threads(1);
  });
}

}  // namespace

template <typename T>
void gemm_cpu(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n,
              int64_t k, T alpha, T beta, const GemmCpuExtras& extras) {
  const int64_t side_tasks = extras.side_task ? extras.side_tasks : 0;
  if (m == 0 || n == 0) {
    for (int64_t t = 0; t < side_tasks; ++t) extras.side_task(t);
    return;
  }
  if (k == 0 || alpha == T(0)) {  // C = beta * C; with beta 0, C's old contents (NaN) are not read
    parallel_for(m * n, kElementwiseGrain, [=](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) c[i] = beta == T(0) ? T(0) : beta * c[i];
    });
    if (extras.tile_epilogue) extras.tile_epilogue(0, m, 0, n);
    for (int64_t t = 0; t < side_tasks; ++t) extras.side_task(t);
    return;
  }
  MT_CHECK_AS(ValueError, std::max({m, n, k}) <= INT_MAX, "gemm: [", m, ", ", n, ", ", k,
              "] exceeds BLAS's 32-bit sizes; split the product into smaller ones");
  prepare_openblas();
  const int64_t lda = trans_a ? m : k, ldb = trans_b ? k : n;  // row lengths as stored
  const Tile tile = gemm_tile(m, n, k);
  const int64_t tiles_m = ceil_div(m, tile.rows), tiles_n = ceil_div(n, tile.cols);
  const int64_t tiles = tiles_m * tiles_n;
  auto run_tile = [&](int64_t t) {
    const int64_t r0 = t / tiles_n * tile.rows, c0 = t % tiles_n * tile.cols;
    const int64_t rows = std::min(tile.rows, m - r0), cols = std::min(tile.cols, n - c0);
    const T* a_rows = trans_a ? a + r0 : a + r0 * lda;  // rows r0.. of op(A)
    const T* b_cols = trans_b ? b + c0 * ldb : b + c0;  // columns c0.. of op(B)
    T* c_tile = c + r0 * n + c0;
    T tile_beta = beta;
    if (beta == T(0)) {
      // Note [zeroing C ourselves]: OpenBLAS's beta 0 is a pass of its own scalar zeroing kernel
      // over C before the product accumulates into it (9% of the large-layer step's time in
      // perf); stores of zeros followed by beta 1 are the same sums, faster.
      for (int64_t r = 0; r < rows; ++r) std::fill_n(c_tile + r * n, cols, T(0));
      tile_beta = T(1);
    }
    blas_gemm(trans_a, trans_b, rows, cols, k, alpha, a_rows, lda, b_cols, ldb, tile_beta, c_tile,
              n);
    if (extras.tile_epilogue) extras.tile_epilogue(r0, r0 + rows, c0, c0 + cols);
  };
  auto run_task = [&](int64_t t) {
    if (t < tiles)
      run_tile(t);
    else
      extras.side_task(t - tiles);
  };
  // Note [GEMM tiles]: threads take the next tile as they finish one (a thread that wakes late
  // or loses its core leaves its tiles to the others); which thread computes a tile does not
  // change its bits. A small product runs on the calling thread: a parallel region would cost
  // more than it saves (under passive waiting, a thread's wake-up: tens of microseconds here).
  if (2.0 * double(m) * double(n) * double(k) < kMinParallelFlops) {
    for (int64_t t = 0; t < tiles + side_tasks; ++t) run_task(t);
    return;
  }
  parallel_tasks(tiles + side_tasks, run_task);
}

template <typename T>
void gemm_cpu(T* c, const T* a, bool trans_a, const T* b, bool trans_b, int64_t m, int64_t n,
              int64_t k, T alpha, T beta) {
  gemm_cpu<T>(c, a, trans_a, b, trans_b, m, n, k, alpha, beta, GemmCpuExtras{});
}

template void gemm_cpu<float>(float*, const float*, bool, const float*, bool, int64_t, int64_t,
                              int64_t, float, float);
template void gemm_cpu<double>(double*, const double*, bool, const double*, bool, int64_t, int64_t,
                               int64_t, double, double);
template void gemm_cpu<float>(float*, const float*, bool, const float*, bool, int64_t, int64_t,
                              int64_t, float, float, const GemmCpuExtras&);
template void gemm_cpu<double>(double*, const double*, bool, const double*, bool, int64_t, int64_t,
                               int64_t, double, double, const GemmCpuExtras&);

void gemm(Tensor& c, const Tensor& a, bool trans_a, const Tensor& b, bool trans_b, double alpha,
          double beta) {
  const GemmDims d = check_gemm_operands("gemm", c, a, trans_a, b, trans_b);
  const int64_t m = d.m, n = d.n, k = d.k;
  if (m == 0 || n == 0) return;
  const OpTimer timer("gemm", c.device());  // --profile-kernels (core/op_profiler.h)
  if (c.device().is_cpu()) {
    dispatch_float(c.dtype(), [&](auto zero) {
      using T = decltype(zero);
      gemm_cpu<T>(c.data<T>(), a.data<T>(), trans_a, b.data<T>(), trans_b, m, n, k, T(alpha),
                  T(beta));
    });
    return;
  }
#if MINITRAIN_WITH_CUDA_LIBS
  dispatch_float(c.dtype(), [&](auto zero) {
    using T = decltype(zero);
    gemm_cublas<T>(c.device(), c.data<T>(), a.data<T>(), trans_a, b.data<T>(), trans_b, m, n, k,
                   T(alpha), T(beta));
  });
#else
  // Emulated GPUs (no cuBLAS) and CPU-only builds: the registry's default names the error where
  // there is no backend (float64 on an emulated GPU, any CUDA tensor in a CPU-only build).
  MT_CUDA_ONLY(gemm_with("auto", c, a, trans_a, b, trans_b, alpha, beta));
#endif
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  const GemmDims d = check_gemm_inputs("matmul", a, trans_a, b, trans_b);
  Tensor c = Tensor::empty(Shape{d.m, d.n}, a.dtype(), a.device());
  gemm(c, a, trans_a, b, trans_b);
  return c;
}

}  // namespace minitrain
