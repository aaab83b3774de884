// Cross-entropy on the GPU: a fused log-softmax + NLL, one warp per row (kBlock / 32 rows a
// block). The warp's lanes stride over the row's C logits three times: the max, then the sum of
// exp(x - max) and (with label smoothing) of w_c (x_c - max), each folded over the warp with
// butterfly shuffles so every lane holds the row's totals, then the gradient. The row is read
// from DRAM once and from cache after; no shared memory, no __syncthreads. Per-row losses go to
// a workspace of doubles that one block then folds in a fixed order (kernels/loss/loss_reduce.cuh):
// no atomics, so the same input gives the same bits every run.

#include "kernels/loss/cross_entropy.h"
#include "kernels/loss/loss_reduce.cuh"

namespace minitrain {

namespace {
constexpr int kRowsPerBlock = kBlock / kWarp;

// The fold over the warp by xor butterflies: every lane ends with the same value, combined in an
// order fixed by the lane numbers.
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
template <typename T>
__device__ __forceinline__ T warp_max(T v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const T other = __shfl_xor_sync(0xffffffffu, v, offset);
    v = other > v ? other : v;
  }
  return v;
}
}  // namespace

// ---- CUDA kernel ----

// Rows are dealt to warps grid-stride; a warp's 32 lanes take the row's columns lane, lane + 32,
// ... Lane 0 writes the row's loss; every lane writes its columns' gradient. grad may be logits:
// the target's logit is read (and the warp past its last shuffle) before any gradient is stored.
template <typename T>
__global__ void cross_entropy_rows_kernel(const T* logits, int64_t rows, int64_t cols,
                                          CrossEntropyArgs<T> a, CrossEntropyOutputs<T> o) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warp = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int64_t warps = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t i = warp; i < rows; i += warps) {
    const T* x = logits + i * cols;
    T* grad = o.grad != nullptr ? o.grad + i * cols : nullptr;
    const T target = a.classes[i];
    if (cross_entropy_ignored(target, a.ignore_index)) {
      if (lane == 0) {
        if (o.row_loss != nullptr) o.row_loss[i] = 0.0;
        if (o.row_out != nullptr) o.row_out[i] = T(0);
      }
      if (grad != nullptr)
        for (int64_t j = lane; j < cols; j += kWarp) grad[j] = T(0);
      continue;
    }
    const int64_t y = static_cast<int64_t>(target);
    T m = x[0];
    for (int64_t j = lane; j < cols; j += kWarp) m = x[j] > m ? x[j] : m;
    m = warp_max(m);
    double sum_exp = 0, weighted_shifted = 0;
    for (int64_t j = lane; j < cols; j += kWarp) {
      const T s = x[j] - m;
      sum_exp += double(actmath::exp(s));
      if (a.k.smoothing) weighted_shifted += (a.weights ? double(a.weights[j]) : 1.0) * double(s);
    }
    sum_exp = warp_sum(sum_exp);
    if (a.k.smoothing) weighted_shifted = warp_sum(weighted_shifted);
    const double lse = ::log(sum_exp);
    const double w_y = a.weights ? double(a.weights[y]) : 1.0;
    const double loss = cross_entropy_row_loss(a.k, lse, double(x[y] - m), w_y, weighted_shifted);
    __syncwarp();  // every lane has read x[y] before any lane overwrites it (grad == logits)
    if (lane == 0) {
      if (o.row_loss != nullptr) o.row_loss[i] = loss;
      if (o.row_out != nullptr) o.row_out[i] = static_cast<T>(loss);
    }
    if (grad != nullptr) {
      const double scale = (o.grad_out ? double(o.grad_out[o.per_row ? i : 0]) : 1.0) * o.inv_total;
      for (int64_t j = lane; j < cols; j += kWarp)
        grad[j] = cross_entropy_grad<T>(a.k, x[j] - m, lse, w_y,
                                        a.weights ? double(a.weights[j]) : 1.0, j == y, scale);
    }
  }
}

// ---- launchers ----

template <typename T>
void cross_entropy_rows_cuda(const T* logits, int64_t rows, int64_t cols,
                             const CrossEntropyArgs<T>& args, const CrossEntropyOutputs<T>& outs,
                             CUstream_st* stream) {
  if (rows == 0) return;
  const unsigned blocks = grid_for(rows, kRowsPerBlock);
  cross_entropy_rows_kernel<T>
      <<<blocks, kBlock, 0, as_cuda(stream)>>>(logits, rows, cols, args, outs);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void cross_entropy_sum_rows_cuda(T* out, const double* row_loss, int64_t rows, double divisor,
                                 CUstream_st* stream) {
  launch_loss_sum_partials(out, row_loss, rows, divisor, as_cuda(stream));
}

#define MT_INSTANTIATE_CROSS_ENTROPY_CUDA(T)                                                       \
  template void cross_entropy_rows_cuda<T>(const T*, int64_t, int64_t, const CrossEntropyArgs<T>&, \
                                           const CrossEntropyOutputs<T>&, CUstream_st*);           \
  template void cross_entropy_sum_rows_cuda<T>(T*, const double*, int64_t, double, CUstream_st*);
MT_INSTANTIATE_CROSS_ENTROPY_CUDA(float)
MT_INSTANTIATE_CROSS_ENTROPY_CUDA(double)
#undef MT_INSTANTIATE_CROSS_ENTROPY_CUDA

}  // namespace minitrain
