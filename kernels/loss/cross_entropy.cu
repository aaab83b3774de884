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
    // A batch that counts nothing (Note [a batch that counts nothing, on the device]): as ignored.
    const bool none = o.counted_divisor != nullptr && o.counted_divisor[0] == 0;
    if (none || cross_entropy_ignored(target, a.ignore_index)) {
      if (lane == 0) {
        if (o.row_loss != nullptr) o.row_loss[i] = 0.0;
        if (o.row_out != nullptr) o.row_out[i] = T(0);
      }
      if (grad != nullptr)
        for (int64_t j = lane; j < cols; j += kWarp) grad[j] = T(0);
      continue;
    }
    if (!cross_entropy_valid_target(target, cols)) {
      // Only with the targets checked on the device (Note [cross_entropy's targets on the
      // device]): never an index; NaN marks the row, the check names it when read.
      if (lane == 0) {
        if (o.row_loss != nullptr) o.row_loss[i] = NAN;
        if (o.row_out != nullptr) o.row_out[i] = T(NAN);
      }
      if (grad != nullptr)
        for (int64_t j = lane; j < cols; j += kWarp) grad[j] = T(NAN);
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
    CrossEntropyCoefficients k = a.k;
    if (a.weight_total != nullptr) k.weight_total = a.weight_total[0];
    const double loss = cross_entropy_row_loss(k, lse, double(x[y] - m), w_y, weighted_shifted);
    __syncwarp();  // every lane has read x[y] before any lane overwrites it (grad == logits)
    if (lane == 0) {
      if (o.row_loss != nullptr) o.row_loss[i] = loss;
      if (o.row_out != nullptr) o.row_out[i] = static_cast<T>(loss);
    }
    if (grad != nullptr) {
      const double inv_total = o.divisor != nullptr ? 1.0 / o.divisor[0] : o.inv_total;
      const double scale = (o.grad_out ? double(o.grad_out[o.per_row ? i : 0]) : 1.0) * inv_total;
      for (int64_t j = lane; j < cols; j += kWarp)
        grad[j] = cross_entropy_grad<T>(k, x[j] - m, lse, w_y,
                                        a.weights ? double(a.weights[j]) : 1.0, j == y, scale);
    }
  }
}

// The mean with its divisor in device memory: loss_sum_partials_kernel's fold, so its bits.
// With zero_when_none a divisor of 0 gives 0, not 0/0 (a batch that counts nothing).
template <typename T>
__global__ void cross_entropy_mean_rows_kernel(T* out, const double* row_loss, int64_t rows,
                                               const double* divisor, bool zero_when_none) {
  double acc = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) acc += row_loss[i];
  acc = block_reduce<reduce_detail::SumOf>(acc);
  if (threadIdx.x != 0) return;
  out[0] = zero_when_none && divisor[0] == 0 ? T(0) : static_cast<T>(acc / divisor[0]);
}

// After the divisor: the step's count of batches that count, and the optimizer's skip flag.
__device__ void count_batch(const double* divisor, double* batches, float* skip) {
  if (batches == nullptr) return;
  batches[0] += divisor[0] > 0 ? 1.0 : 0.0;
  if (skip != nullptr) skip[0] = batches[0] == 0 ? 1.0f : 0.0f;
}

// With weights, thread 0 alone: sums of doubles have the host's bits only in the host's order
// (rows, then classes, each from 0.0), and it meets the first bad row (or weight) on the way.
template <typename T>
__device__ void check_weighted_targets(double* divisor, double* check, const T* classes,
                                       const T* weights, int64_t rows, int64_t cols,
                                       int64_t ignore_index) {
  double target_weights = 0, bad_row = -1;
  for (int64_t i = 0; i < rows; ++i) {
    const T t = classes[i];
    if (cross_entropy_ignored(t, ignore_index)) continue;
    if (!cross_entropy_valid_target(t, cols)) {
      if (bad_row < 0) bad_row = double(i);
      continue;
    }
    target_weights += double(weights[static_cast<int64_t>(t)]);
  }
  double total = 0, bad_class = -1;
  for (int64_t c = 0; c < cols; ++c) {
    const double w = double(weights[c]);
    if (!(w >= 0) && bad_class < 0) bad_class = double(c);
    total += w;
  }
  divisor[0] = target_weights;
  divisor[1] = total;
  if (check[0] != 0) return;
  if (bad_class >= 0) {  // the host check looks at the weights first
    check[0] = 2;
    check[1] = bad_class;
    check[2] = double(weights[static_cast<int64_t>(bad_class)]);
  } else if (bad_row >= 0) {
    check[0] = 1;
    check[1] = bad_row;
    check[2] = double(classes[static_cast<int64_t>(bad_row)]);
  }
}

// One block. Without weights: the non-ignored rows counted (whole numbers in double: exact in
// any order) with the bad ones; when there is one and the check is empty, thread 0 finds the
// first in row order. With weights: check_weighted_targets.
template <typename T>
__global__ void cross_entropy_check_targets_kernel(double* divisor, double* check, const T* classes,
                                                   const T* weights, int64_t rows, int64_t cols,
                                                   int64_t ignore_index, double* batches,
                                                   float* skip) {
  if (weights != nullptr) {  // the same for the whole block: no barrier below is reached
    if (threadIdx.x == 0) {
      check_weighted_targets(divisor, check, classes, weights, rows, cols, ignore_index);
      count_batch(divisor, batches, skip);
    }
    return;
  }
  double counted = 0, bad = 0;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    if (cross_entropy_ignored(classes[i], ignore_index)) continue;
    counted += 1;
    bad += cross_entropy_valid_target(classes[i], cols) ? 0 : 1;
  }
  counted = block_reduce<reduce_detail::SumOf>(counted);
  __syncthreads();  // the second fold reuses the first's shared slots (block_reduce.cuh)
  bad = block_reduce<reduce_detail::SumOf>(bad);
  if (threadIdx.x != 0) return;
  divisor[0] = counted;
  count_batch(divisor, batches, skip);
  if (bad == 0 || check[0] != 0) return;
  for (int64_t i = 0; i < rows; ++i) {
    const T t = classes[i];
    if (cross_entropy_ignored(t, ignore_index) || cross_entropy_valid_target(t, cols)) continue;
    check[0] = 1;
    check[1] = double(i);
    check[2] = double(t);
    return;
  }
}

// One block: each thread its rows' top-1 (and top-k) test, folded; thread 0 adds to the counts.
template <typename T>
__global__ void cross_entropy_count_correct_kernel(double* counts, double* topk, const T* logits,
                                                   const T* classes, int64_t rows, int64_t cols,
                                                   int64_t ignore_index, int64_t k) {
  CrossEntropyRowCounts c;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x)
    cross_entropy_count_row(c, logits, classes, i, cols, ignore_index, k, topk != nullptr);
  const double correct = block_reduce<reduce_detail::SumOf>(c.correct);
  __syncthreads();  // each fold reuses the one before's shared slots (block_reduce.cuh)
  const double counted = block_reduce<reduce_detail::SumOf>(c.counted);
  double in_topk = 0;
  if (topk != nullptr) {  // the same for every thread of the block: no divergent barrier
    __syncthreads();
    in_topk = block_reduce<reduce_detail::SumOf>(c.in_topk);
  }
  if (threadIdx.x == 0) {
    counts[0] += correct;
    counts[1] += counted;
    if (topk != nullptr) topk[0] += in_topk;
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

template <typename T>
void cross_entropy_mean_rows_cuda(T* out, const double* row_loss, int64_t rows,
                                  const double* divisor, CUstream_st* stream, bool zero_when_none) {
  cross_entropy_mean_rows_kernel<T>
      <<<1, kBlock, 0, as_cuda(stream)>>>(out, row_loss, rows, divisor, zero_when_none);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void cross_entropy_check_targets_cuda(double* divisor, double* check, const T* classes,
                                      const T* weights, int64_t rows, int64_t cols,
                                      int64_t ignore_index, CUstream_st* stream, double* batches,
                                      float* skip) {
  // With weights one thread does the work: a warp, not a block, is launched.
  cross_entropy_check_targets_kernel<T>
      <<<1, weights != nullptr ? kWarp : kBlock, 0, as_cuda(stream)>>>(
          divisor, check, classes, weights, rows, cols, ignore_index, batches, skip);
  CHECK_CUDA_LAUNCH();
}

template <typename T>
void cross_entropy_count_correct_cuda(double* counts, double* topk, const T* logits,
                                      const T* classes, int64_t rows, int64_t cols,
                                      int64_t ignore_index, int64_t k, CUstream_st* stream) {
  cross_entropy_count_correct_kernel<T><<<1, kBlock, 0, as_cuda(stream)>>>(
      counts, topk, logits, classes, rows, cols, ignore_index, k);
  CHECK_CUDA_LAUNCH();
}

#define MT_INSTANTIATE_CROSS_ENTROPY_CUDA(T)                                                       \
  template void cross_entropy_rows_cuda<T>(const T*, int64_t, int64_t, const CrossEntropyArgs<T>&, \
                                           const CrossEntropyOutputs<T>&, CUstream_st*);           \
  template void cross_entropy_sum_rows_cuda<T>(T*, const double*, int64_t, double, CUstream_st*);  \
  template void cross_entropy_mean_rows_cuda<T>(T*, const double*, int64_t, const double*,         \
                                                CUstream_st*, bool);                               \
  template void cross_entropy_check_targets_cuda<T>(double*, double*, const T*, const T*, int64_t, \
                                                    int64_t, int64_t, CUstream_st*, double*,       \
                                                    float*);                                       \
  template void cross_entropy_count_correct_cuda<T>(double*, double*, const T*, const T*, int64_t, \
                                                    int64_t, int64_t, int64_t, CUstream_st*);
MT_INSTANTIATE_CROSS_ENTROPY_CUDA(float)
MT_INSTANTIATE_CROSS_ENTROPY_CUDA(double)
#undef MT_INSTANTIATE_CROSS_ENTROPY_CUDA

}  // namespace minitrain
