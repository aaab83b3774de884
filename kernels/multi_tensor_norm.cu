// Multi-tensor clipping on the GPU. The norm: pass 1 is one launch whose blocks are every tensor's
// squared_norm pass-1 blocks side by side (tensor k keeps its own grid of reduce_cuda_partials(n_k)
// blocks, so its partials are the one-tensor kernel's bits: kernels/reduce_partials.cuh); pass 2
// is one block that folds each tensor's partials as reduce_final_kernel does, rounds the result
// to the tensor's type and adds it to the running total, tensor by tensor in list order (Note [the
// per-tensor norm's bits], multi_tensor_norm.h). No atomics: the bits do not depend on block
// order. The scale: one multi-tensor launch (kernels/multi_tensor_apply.cuh) whose blocks each
// read the sum of squares and scale one chunk, or return at once when the factor is >= 1.

#include <cuda_runtime.h>

#include <algorithm>
#include <array>

#include "kernels/multi_tensor_apply.cuh"
#include "kernels/multi_tensor_norm.h"
#include "kernels/reduce.h"
#include "kernels/reduce_partials.cuh"

namespace minitrain {

namespace {

using reduce_detail::SquaresOf;

// Kernel arguments (by value, < 4 KiB): up to kNormMaxTensors tensors of one launch.
struct NormPartialsArgs {
  const void* ptrs[kNormMaxTensors];
  int64_t sizes[kNormMaxTensors];
  int32_t
      first_block[kNormMaxTensors + 1];  // tensor t's blocks: [first_block[t], first_block[t+1])
  uint8_t is_double[kNormMaxTensors];
  uint8_t vec[kNormMaxTensors];  // 16-byte aligned: pass 1 reads packs
  int32_t count;
};
struct NormFoldArgs {
  int32_t blocks[kNormMaxTensors];  // tensor t's partials, after those of tensors 0..t-1
  uint8_t is_double[kNormMaxTensors];
  int32_t count;
  bool first;  // the launch holds the list's first tensor: the total starts there
};
static_assert(sizeof(NormPartialsArgs) <= 4000 && sizeof(NormFoldArgs) <= 4000,
              "kernel parameters are limited to 4 KiB");

// ---- CUDA kernels ----

// Block b belongs to the last tensor whose first block is <= b (an empty tensor has no blocks, so
// it is never the last such one); it runs block b - first_block[t] of that tensor's own grid.
__global__ void norm_partials_kernel(NormPartialsArgs a, double* partials) {
  const int b = int(blockIdx.x);
  int lo = 0, hi = a.count - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.first_block[mid] <= b)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int t = lo;
  const int64_t block = b - a.first_block[t];
  const int64_t blocks = a.first_block[t + 1] - a.first_block[t];
  const bool vec = a.vec[t] != 0;
  const double acc = a.is_double[t] != 0
                         ? block_partial<double, SquaresOf>(static_cast<const double*>(a.ptrs[t]),
                                                            a.sizes[t], vec, block, blocks)
                         : block_partial<float, SquaresOf>(static_cast<const float*>(a.ptrs[t]),
                                                           a.sizes[t], vec, block, blocks);
  if (threadIdx.x == 0) partials[b] = acc;
}

// One block: tensor by tensor, reduce_final_kernel's fold of its partials, rounded to its type
// (squared_norm's result), widened and added to the total (the per-tensor path's add kernel).
__global__ void norm_fold_kernel(NormFoldArgs a, const double* partials, double* total) {
  double running = 0.0;  // meaningful in thread 0
  if (!a.first && threadIdx.x == 0) running = total[0];
  int64_t offset = 0;
  for (int t = 0; t < a.count; ++t) {
    double acc = SquaresOf::identity();
    for (int64_t i = threadIdx.x; i < a.blocks[t]; i += blockDim.x)
      acc = SquaresOf::combine(acc, partials[offset + i]);
    acc = block_reduce<SquaresOf>(acc);
    if (threadIdx.x == 0) {
      const double v = a.is_double[t] != 0 ? acc : static_cast<double>(static_cast<float>(acc));
      running = (a.first && t == 0) ? v : running + v;
    }
    offset += a.blocks[t];
    __syncthreads();  // the next tensor's block_reduce reuses the shared slots
  }
  if (threadIdx.x == 0) total[0] = running;
}

template <typename T>
__global__ void clip_scale_multi_kernel(TensorListArgs<1> args, const double* sum_sq,
                                        double max_norm) {
  const double coef = clip_coefficient(sum_sq[0], max_norm);
  if (coef >= 1.0) return;  // uniform over the grid: the tensors stay as they are
  const T alpha = static_cast<T>(coef);
  const ChunkOf<1> chunk(args);
  T* x = chunk.template ptr<T>(0);
  for (int64_t i = threadIdx.x; i < chunk.len; i += blockDim.x) x[i] = alpha * x[i];
}

int64_t pass1_blocks(int64_t n) { return n == 0 ? 0 : reduce_cuda_partials(n); }

}  // namespace

// ---- launchers ----

int64_t squared_norm_multi_cuda_partials(const NormList& list) {
  int64_t blocks = 0;
  for (int64_t n : list.sizes) blocks += pass1_blocks(n);
  return std::max<int64_t>(blocks, 1);
}

void squared_norm_multi_cuda(double* total, const NormList& list, double* partials,
                             CUstream_st* s) {
  const cudaStream_t stream = as_cuda(s);
  const std::size_t count = list.sizes.size();
  if (count == 0) {  // a fold of nothing writes 0
    NormFoldArgs fold{};
    fold.first = true;
    norm_fold_kernel<<<1, kBlock, 0, stream>>>(fold, partials, total);
    CHECK_CUDA_LAUNCH();
    return;
  }
  int64_t done_blocks = 0;  // partials of the launches before this one
  for (std::size_t g = 0; g < count; g += kNormMaxTensors) {
    const std::size_t end = std::min<std::size_t>(count, g + kNormMaxTensors);
    NormPartialsArgs pass1{};
    NormFoldArgs fold{};
    int32_t blocks = 0;
    for (std::size_t k = g; k < end; ++k) {
      const std::size_t j = k - g;
      const int64_t nb = pass1_blocks(list.sizes[k]);
      pass1.ptrs[j] = list.ptrs[k];
      pass1.sizes[j] = list.sizes[k];
      pass1.first_block[j] = blocks;
      pass1.is_double[j] = list.is_double[k] ? 1 : 0;
      pass1.vec[j] = is_aligned16(list.ptrs[k]) ? 1 : 0;
      fold.blocks[j] = static_cast<int32_t>(nb);
      fold.is_double[j] = pass1.is_double[j];
      blocks += static_cast<int32_t>(nb);
    }
    pass1.first_block[end - g] = blocks;
    pass1.count = fold.count = static_cast<int32_t>(end - g);
    fold.first = g == 0;
    if (blocks > 0) {
      norm_partials_kernel<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(
          pass1, partials + done_blocks);
      CHECK_CUDA_LAUNCH();
    }
    norm_fold_kernel<<<1, kBlock, 0, stream>>>(fold, partials + done_blocks, total);
    CHECK_CUDA_LAUNCH();
    done_blocks += blocks;
  }
}

template <typename T>
void clip_scale_multi_cuda(const std::vector<T*>& xs, const std::vector<int64_t>& sizes,
                           const double* sum_sq, double max_norm, CUstream_st* s) {
  std::vector<std::array<void*, 1>> ptrs(xs.size());
  for (std::size_t k = 0; k < xs.size(); ++k) ptrs[k][0] = xs[k];
  multi_tensor_apply<1>(ptrs, sizes, [&](const TensorListArgs<1>& a, unsigned blocks) {
    clip_scale_multi_kernel<T><<<blocks, kBlock, 0, as_cuda(s)>>>(a, sum_sq, max_norm);
  });
}

template void clip_scale_multi_cuda<float>(const std::vector<float*>&, const std::vector<int64_t>&,
                                           const double*, double, CUstream_st*);
template void clip_scale_multi_cuda<double>(const std::vector<double*>&,
                                            const std::vector<int64_t>&, const double*, double,
                                            CUstream_st*);

}  // namespace minitrain
