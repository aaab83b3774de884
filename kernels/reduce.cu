// Reductions on the GPU: each thread folds a grid-stride slice in double, warps combine with
// shuffles, warps' results meet in shared memory; pass 1 leaves one partial per block, pass 2
// (one block) folds those. Memory-bound; the grid depends only on n, so results are bit-identical
// run to run (no atomics). sum_rows: one thread per column walking the rows (coalesced reads).

#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda_launch.cuh"
#include "kernels/reduce.h"

namespace minitrain {

namespace {

constexpr int kWarp = 32;
// Each thread of pass 1 handles at least this many elements before blocks are added, and at most
// kMaxPartials blocks run: about 8 waves of 256-thread blocks on a 132-SM H100 is already enough
// to saturate memory bandwidth, and pass 2 then folds at most 1024 values.
constexpr int64_t kItemsPerThread = 8;
constexpr int64_t kMaxPartials = 1024;

// Valid in thread 0 only. Needs blockDim.x == kBlock (a multiple of the warp size).
template <typename Op>
__device__ double block_reduce(double v) {
  __shared__ double warp_results[kBlock / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = Op::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kBlock / kWarp ? warp_results[lane] : Op::identity();
    for (int offset = kWarp / 2; offset > 0; offset /= 2)
      v = Op::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  }
  return v;
}

// ---- CUDA kernels ----

template <typename T, typename Op>
__global__ void reduce_partials_kernel(double* partials, const T* x, int64_t n) {
  double acc = Op::identity();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    acc = Op::combine(acc, Op::map(static_cast<double>(x[i])));
  acc = block_reduce<Op>(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <typename T, typename Op>
__global__ void reduce_final_kernel(T* out, const double* partials, int64_t count,
                                    double divisor) {
  double acc = Op::identity();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = Op::combine(acc, partials[i]);
  acc = block_reduce<Op>(acc);
  if (threadIdx.x == 0) out[0] = static_cast<T>(acc / divisor);
}

template <typename T>
__global__ void sum_rows_column_kernel(T* out, const T* x, int64_t rows, int64_t cols) {
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < cols;
       j += int64_t(gridDim.x) * blockDim.x) {
    double acc = 0.0;
    for (int64_t i = 0; i < rows; ++i) acc += static_cast<double>(x[i * cols + j]);
    out[j] = static_cast<T>(acc);
  }
}

template <typename T, typename Op>
void reduce_two_pass(T* out, const T* x, int64_t n, double divisor, double* partials,
                     cudaStream_t s) {
  const int64_t blocks = n == 0 ? 0 : reduce_cuda_partials(n);
  if (blocks > 0) {
    reduce_partials_kernel<T, Op><<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(partials, x, n);
    CHECK_CUDA_LAUNCH();
  }
  // With n == 0 pass 2 folds nothing: identity / divisor (0, or NaN for mean).
  reduce_final_kernel<T, Op><<<1, kBlock, 0, s>>>(out, partials, blocks, divisor);
  CHECK_CUDA_LAUNCH();
}

}  // namespace

// ---- launchers ----

int64_t reduce_cuda_partials(int64_t n) {
  const int64_t per_block = int64_t(kBlock) * kItemsPerThread;
  return std::clamp<int64_t>((n + per_block - 1) / per_block, 1, kMaxPartials);
}

template <typename T>
void reduce_cuda(T* out, const T* x, int64_t n, ReduceOp op, double* partials, CUstream_st* s) {
  using namespace reduce_detail;
  const cudaStream_t stream = as_cuda(s);
  switch (op) {
    case ReduceOp::Sum: reduce_two_pass<T, SumOf>(out, x, n, 1.0, partials, stream); break;
    case ReduceOp::Mean:
      reduce_two_pass<T, SumOf>(out, x, n, static_cast<double>(n), partials, stream);
      break;
    case ReduceOp::SquaredNorm:
      reduce_two_pass<T, SquaresOf>(out, x, n, 1.0, partials, stream);
      break;
    case ReduceOp::MaxAbs: reduce_two_pass<T, MaxAbsOf>(out, x, n, 1.0, partials, stream); break;
  }
}

template <typename T>
void sum_rows_cuda(T* out, const T* x, int64_t rows, int64_t cols, CUstream_st* s) {
  if (cols == 0) return;
  sum_rows_column_kernel<T><<<grid_for(cols), kBlock, 0, as_cuda(s)>>>(out, x, rows, cols);
  CHECK_CUDA_LAUNCH();
}

template void reduce_cuda<float>(float*, const float*, int64_t, ReduceOp, double*, CUstream_st*);
template void reduce_cuda<double>(double*, const double*, int64_t, ReduceOp, double*,
                                  CUstream_st*);
template void sum_rows_cuda<float>(float*, const float*, int64_t, int64_t, CUstream_st*);
template void sum_rows_cuda<double>(double*, const double*, int64_t, int64_t, CUstream_st*);

}  // namespace minitrain
