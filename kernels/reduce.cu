// Reductions on the GPU: each thread folds a grid-stride slice in double (16-byte packs when the
// input is aligned, kernels/reduce_partials.cuh), the block folds those with shuffles and shared
// memory (kernels/block_reduce.cuh); pass 1 leaves one partial per block, pass 2 (one block)
// folds those. Memory-bound; the grid depends only on n and the pack path only on the pointer's
// alignment, so results for a given tensor are bit-identical run to run (no atomics).
// sum_rows: kernels/column_reduce.cuh (32 columns x 16 row slices a block, coalesced reads).

#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "kernels/block_reduce.cuh"
#include "kernels/column_reduce.cuh"
#include "kernels/convert.h"
#include "kernels/reduce.h"
#include "kernels/reduce_partials.cuh"
#include "kernels/vectorized.cuh"

namespace minitrain {

namespace {

// Each thread of pass 1 handles at least this many elements before blocks are added, and at most
// kMaxPartials blocks run: about 8 waves of 256-thread blocks on a 132-SM H100 is already enough
// to saturate memory bandwidth, and pass 2 then folds at most 1024 values.
constexpr int64_t kItemsPerThread = 8;
constexpr int64_t kMaxPartials = 1024;

// ---- CUDA kernels ----

template <typename T, typename Op>
__global__ void reduce_partials_kernel(double* partials, const T* x, int64_t n, bool vec) {
  const double acc = block_partial<T, Op>(x, n, vec, blockIdx.x, gridDim.x);
  if (threadIdx.x == 0) partials[blockIdx.x] = acc;
}

template <typename T, typename Op>
__global__ void reduce_final_kernel(T* out, const double* partials, int64_t count, double divisor) {
  double acc = Op::identity();
  for (int64_t i = threadIdx.x; i < count; i += blockDim.x) acc = Op::combine(acc, partials[i]);
  acc = block_reduce<Op>(acc);
  if (threadIdx.x == 0) out[0] = static_cast<T>(acc / divisor);
}

template <typename T>
struct ReadAt {
  const T* x;
  __device__ T operator()(int64_t i) const { return x[i]; }
};

template <typename T, typename Op>
void reduce_two_pass(T* out, const T* x, int64_t n, double divisor, double* partials,
                     cudaStream_t s) {
  const int64_t blocks = n == 0 ? 0 : reduce_cuda_partials(n);
  if (blocks > 0) {
    reduce_partials_kernel<T, Op>
        <<<static_cast<unsigned>(blocks), kBlock, 0, s>>>(partials, x, n, is_aligned16(x));
    CHECK_CUDA_LAUNCH();
  }
  // With n == 0 pass 2 folds nothing: identity / divisor (0, or NaN for mean).
  reduce_final_kernel<T, Op><<<1, kBlock, 0, s>>>(out, partials, blocks, divisor);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
__global__ void clip_scale_kernel(T* x, int64_t n, const double* sum_sq, double max_norm) {
  const double coef = clip_coefficient(sum_sq[0], max_norm);
  if (coef >= 1.0) return;  // uniform over the grid: x stays as it is
  const T alpha = static_cast<T>(coef);
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    x[i] = alpha * x[i];
}

}  // namespace

// ---- launchers ----

template <typename T>
void clip_scale_cuda(T* x, int64_t n, const double* sum_sq, double max_norm, CUstream_st* s) {
  if (n == 0) return;
  const int64_t blocks = std::min<int64_t>((n + kBlock - 1) / kBlock, kMaxPartials);
  clip_scale_kernel<T>
      <<<static_cast<unsigned>(blocks), kBlock, 0, as_cuda(s)>>>(x, n, sum_sq, max_norm);
  CHECK_CUDA_LAUNCH();
}

int64_t reduce_cuda_partials(int64_t n) {
  const int64_t per_block = int64_t(kBlock) * kItemsPerThread;
  return std::clamp<int64_t>((n + per_block - 1) / per_block, 1, kMaxPartials);
}

template <typename T>
void reduce_cuda(T* out, const T* x, int64_t n, ReduceKind op, double* partials, CUstream_st* s) {
  using namespace reduce_detail;
  const cudaStream_t stream = as_cuda(s);
  switch (op) {
    case ReduceKind::Sum:
      reduce_two_pass<T, SumOf>(out, x, n, 1.0, partials, stream);
      break;
    case ReduceKind::Mean:
      reduce_two_pass<T, SumOf>(out, x, n, static_cast<double>(n), partials, stream);
      break;
    case ReduceKind::SquaredNorm:
      reduce_two_pass<T, SquaresOf>(out, x, n, 1.0, partials, stream);
      break;
    case ReduceKind::MaxAbs:
      reduce_two_pass<T, MaxAbsOf>(out, x, n, 1.0, partials, stream);
      break;
  }
}

// A 16-bit element widened (exact) as the column sum reads it.
template <typename X>
struct ReadWidened {
  const X* x;
  __device__ float operator()(int64_t i) const { return widen(x[i]); }
};

template <typename T, typename X>
void sum_rows_cuda(T* out, const X* x, int64_t rows, int64_t cols, CUstream_st* s) {
  if constexpr (std::is_same_v<T, X>)
    column_sum_cuda(out, rows, cols, ReadAt<T>{x}, as_cuda(s));
  else
    column_sum_cuda(out, rows, cols, ReadWidened<X>{x}, as_cuda(s));
}

template void reduce_cuda<float>(float*, const float*, int64_t, ReduceKind, double*, CUstream_st*);
template void reduce_cuda<double>(double*, const double*, int64_t, ReduceKind, double*,
                                  CUstream_st*);
template void clip_scale_cuda<float>(float*, int64_t, const double*, double, CUstream_st*);
template void clip_scale_cuda<double>(double*, int64_t, const double*, double, CUstream_st*);
template void sum_rows_cuda<float>(float*, const float*, int64_t, int64_t, CUstream_st*);
template void sum_rows_cuda<double>(double*, const double*, int64_t, int64_t, CUstream_st*);
template void sum_rows_cuda<float, BFloat16>(float*, const BFloat16*, int64_t, int64_t,
                                             CUstream_st*);
template void sum_rows_cuda<float, Half>(float*, const Half*, int64_t, int64_t, CUstream_st*);

}  // namespace minitrain
