// Rung 04, double buffering: smem_tiled (rung 03) with two shared-memory buffers per operand, so
// the global loads of tile k+1 are in flight while the block multiplies tile k.
//
// Mapping (as smem_tiled, SmemTiledTiling): a 32 x 32 C tile per block of 1024 threads; thread
// tid computes C(row0 + tid / 32, col0 + tid % 32) in one register. Each thread copies one
// element of op(A) and one of op(B) per tile, in the coalesced order of scalar_load_coord.
// What changed from rung 03: the tile loop no longer waits for a tile's loads right before using
// it. On sm_80+ the copies are cp.async (global -> shared without passing through registers, waited
// on with __pipeline_wait_prior one tile later); below sm_80 (and on the emulated GPU) each thread
// stages the next tile's elements in registers during the compute and stores them afterwards.
// Bound: still shared-memory bandwidth and issue, as rung 03 (one shared load per multiply-add of
// B); the win is hidden global-load latency, which matters once the tiles are bigger (rungs 05+).

#if defined(__NVCC__)
#include <cuda_pipeline.h>
#endif

#include "core/cuda_check.h"
#include "kernels/gemm/gemm_ladder/gemm_ladder_kernels.h"
#include "kernels/gemm/gemm_ladder/gemm_launch.cuh"

namespace minitrain::gemm_ladder {

using DoubleBufferedTiling = SmemTiledTiling;

namespace {

using T = DoubleBufferedTiling;
// One padding column, as in smem_tiled: a transposed operand's 32 stores down a tile column land
// in 32 different banks.
constexpr int kLd = T::kBlockK + 1;
constexpr int kTileFloats = T::kBlockM * kLd;
constexpr int kPerThread = T::kBlockM * T::kBlockK / T::kThreads;  // elements per operand and tile
static_assert(T::kBlockM == T::kBlockK && T::kBlockN == T::kBlockK,
              "square tiles share one stride");

/// Where element `step` of this thread's share of the tile of op(X) at (r0, c0) lives: its shared
/// slot, and whether it lies inside X (outside it the slot gets zero).
struct Slot {
  int smem;
  int64_t r, c;
  bool inside;
};
__device__ __forceinline__ Slot slot(const Operand& x, int64_t r0, int64_t c0, int tid, int step) {
  const TileCoord t = scalar_load_coord(step * T::kThreads + tid, T::kBlockM, T::kBlockK, x.trans);
  return Slot{t.r * kLd + t.c, r0 + t.r, c0 + t.c, r0 + t.r < x.rows && c0 + t.c < x.cols};
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
/// Starts the copy of one tile of op(X) into `s` with cp.async; out-of-range elements copy zero
/// bytes and zero-fill their 4 (the source pointer stays valid, it is never read).
__device__ __forceinline__ void copy_tile_async(float* s, const Operand& x, int64_t r0, int64_t c0,
                                                int tid) {
#pragma unroll
  for (int step = 0; step < kPerThread; ++step) {
    const Slot e = slot(x, r0, c0, tid, step);
    const float* src = e.inside ? x.p + x.offset(e.r, e.c) : x.p;
    __pipeline_memcpy_async(s + e.smem, src, sizeof(float), e.inside ? 0 : sizeof(float));
  }
}
#else
/// The fallback's two halves: fetch one tile's elements into registers, then store them.
__device__ __forceinline__ void fetch_tile(float (&r)[kPerThread], const Operand& x, int64_t r0,
                                           int64_t c0, int tid) {
#pragma unroll
  for (int step = 0; step < kPerThread; ++step) {
    const Slot e = slot(x, r0, c0, tid, step);
    r[step] = e.inside ? x.at(e.r, e.c) : 0.f;
  }
}
__device__ __forceinline__ void store_tile(float* s, const float (&r)[kPerThread], const Operand& x,
                                           int tid) {
#pragma unroll
  for (int step = 0; step < kPerThread; ++step) s[slot(x, 0, 0, tid, step).smem] = r[step];
}
#endif

}  // namespace

__global__ void __launch_bounds__(T::kThreads) gemm_double_buffered_kernel(GemmArgs g) {
  __shared__ float as[2][kTileFloats];  // op(A) tiles [BM][BK], buffer k % 2 holds tile k
  __shared__ float bs[2][kTileFloats];  // op(B) tiles [BK][BN]
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t row0 = block_row0<T>(blockIdx.x, blockIdx.y),
                col0 = block_col0<T>(blockIdx.x, blockIdx.y);
  const int lr = tid / T::kBlockN, lc = tid % T::kBlockN;  // this thread's C element in the tile
  const int64_t tiles = ceil_div(g.k, T::kBlockK);
  float acc = 0.f;
  const auto multiply = [&](int buf) {
#pragma unroll
    for (int q = 0; q < T::kBlockK; ++q) acc += as[buf][lr * kLd + q] * bs[buf][q * kLd + lc];
  };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (tiles > 0) {
    copy_tile_async(as[0], g.a, row0, 0, tid);
    copy_tile_async(bs[0], g.b, 0, col0, tid);
  }
  __pipeline_commit();
  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = static_cast<int>(t % 2);
    if (t + 1 < tiles) {  // tile t+1 goes into the buffer everyone finished reading last iteration
      copy_tile_async(as[buf ^ 1], g.a, row0, (t + 1) * T::kBlockK, tid);
      copy_tile_async(bs[buf ^ 1], g.b, (t + 1) * T::kBlockK, col0, tid);
    }
    __pipeline_commit();       // one batch per iteration (possibly empty), so "prior 1" is tile t+1
    __pipeline_wait_prior(1);  // this thread's copies of tile t have landed...
    __syncthreads();           // ...and everyone's
    multiply(buf);
    __syncthreads();  // everyone is done reading buf before iteration t+1 refills it with tile t+2
  }
#else
  float ra[kPerThread], rb[kPerThread];
  if (tiles > 0) {
    fetch_tile(ra, g.a, row0, 0, tid);
    fetch_tile(rb, g.b, 0, col0, tid);
    store_tile(as[0], ra, g.a, tid);
    store_tile(bs[0], rb, g.b, tid);
  }
  __syncthreads();
  for (int64_t t = 0; t < tiles; ++t) {
    const int buf = static_cast<int>(t % 2);
    const bool next = t + 1 < tiles;
    if (next) {  // issue the loads of tile t+1; they complete while tile t is multiplied
      fetch_tile(ra, g.a, row0, (t + 1) * T::kBlockK, tid);
      fetch_tile(rb, g.b, (t + 1) * T::kBlockK, col0, tid);
    }
    multiply(buf);
    if (next) {  // buf ^ 1 was last read in iteration t-1, which ended at a barrier
      store_tile(as[buf ^ 1], ra, g.a, tid);
      store_tile(bs[buf ^ 1], rb, g.b, tid);
    }
    __syncthreads();  // tile t+1 is complete, and nobody reads buf again before it is refilled
  }
#endif
  // Threads outside C still took part in the loads and barriers above; only the store is guarded.
  if (in_c(row0 + lr, col0 + lc, g.m, g.n))
    store_c(g.c, g.n, row0 + lr, col0 + lc, acc, g.alpha, g.beta);
}

void gemm_double_buffered_cuda(const GemmArgs& g, CUstream_st* stream) {
  const dim3 grid = launch_grid<DoubleBufferedTiling>(g, "double_buffered");
  gemm_double_buffered_kernel<<<grid, DoubleBufferedTiling::kThreads, 0, stream>>>(g);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain::gemm_ladder
