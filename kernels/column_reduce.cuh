#pragma once
// Column sums of a [rows, cols] matrix on the GPU, in double, deterministically: a block is 32
// columns by kRowSlices row slices; thread (c, s) sums rows s, s + kRowSlices, ... of column c
// (a warp reads 32 consecutive floats of one row: coalesced), and the slices' sums meet in shared
// memory in slice order. No atomics, and the grouping depends only on the shape, so results are
// bit-identical run to run. sum_rows and the fused activation backward + bias gradient share this
// kernel, so their bias gradients are equal bit for bit.
//
// `elem(i)` gives the value at flat index i = r * cols + c (and may write other outputs there).

#include "kernels/cuda_launch.cuh"

namespace minitrain {

inline constexpr int kColumnTile = 32;  // one warp across the columns
inline constexpr int kRowSlices = 16;   // 512 threads a block: 16 rows in flight per column

// ---- CUDA kernel ----

template <typename T, typename Elem>
__global__ void column_sum_sliced_kernel(T* out, int64_t rows, int64_t cols, Elem elem) {
  __shared__ double partial[kRowSlices][kColumnTile + 1];  // +1: no bank conflicts on the fold
  const int64_t col = int64_t(blockIdx.x) * kColumnTile + threadIdx.x;
  double acc = 0.0;
  if (col < cols)
    for (int64_t r = threadIdx.y; r < rows; r += kRowSlices)
      acc += static_cast<double>(elem(r * cols + col));
  partial[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    double sum = 0.0;
    for (int s = 0; s < kRowSlices; ++s) sum += partial[s][threadIdx.x];
    out[col] = static_cast<T>(sum);
  }
}

// ---- launcher ----

template <typename T, typename Elem>
void column_sum_cuda(T* out, int64_t rows, int64_t cols, Elem elem, cudaStream_t stream) {
  if (cols == 0) return;
  const dim3 block(kColumnTile, kRowSlices);
  const auto blocks = static_cast<unsigned>((cols + kColumnTile - 1) / kColumnTile);
  column_sum_sliced_kernel<T, Elem><<<blocks, block, 0, stream>>>(out, rows, cols, elem);
  CHECK_CUDA_LAUNCH();
}

}  // namespace minitrain
