#pragma once
// The device side of multi-tensor apply (kernels/multi_tensor_apply.h): the argument table a
// launch carries by value, and the driver that fills one table per planned launch.

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cuda_launch.cuh"
#include "kernels/multi_tensor_apply.h"

namespace minitrain {

/// Kernel argument (by value, < 4 KiB): pointers of kDepth operands of up to kMaxTensors tensors.
template <int kDepth>
struct TensorListArgs {
  static constexpr int kMaxTensors = multi_tensor_max_tensors(kDepth);
  void* ptrs[kDepth][kMaxTensors];
  int64_t sizes[kMaxTensors];
  int32_t block_chunk[kMultiTensorMaxBlocks];
  uint8_t block_tensor[kMultiTensorMaxBlocks];
};
static_assert(sizeof(TensorListArgs<5>) <= 4000 && sizeof(TensorListArgs<2>) <= 4000,
              "kernel parameters are limited to 4 KiB");

/// This block's chunk: operand s starts at ptr<T>(s), `len` elements. The pointers are read out
/// of the argument table once (by value: no reference to the kernel parameter is kept, which
/// could make the compiler copy the whole table to local memory).
template <int kDepth>
struct ChunkOf {
  void* base[kDepth];  // operand s of this block's tensor (null where unused)
  int64_t begin;       // the chunk's first element in that tensor
  int64_t len;
  __device__ __forceinline__ explicit ChunkOf(const TensorListArgs<kDepth>& a) {
    const int tensor = a.block_tensor[blockIdx.x];
    begin = int64_t(a.block_chunk[blockIdx.x]) * kMultiTensorChunk;
    const int64_t rest = a.sizes[tensor] - begin;
    len = rest < kMultiTensorChunk ? rest : kMultiTensorChunk;
#pragma unroll
    for (int s = 0; s < kDepth; ++s) base[s] = a.ptrs[s][tensor];
  }
  template <typename T>
  __device__ __forceinline__ T* ptr(int s) const {
    return base[s] == nullptr ? nullptr : static_cast<T*>(base[s]) + begin;
  }
};

// ---- launcher ----

/// ptrs[k][s]: operand s of tensor k (null where the variant does not use the operand);
/// launch(args, blocks) starts one kernel of `blocks` blocks.
template <int kDepth, typename Launch>
void multi_tensor_apply(const std::vector<std::array<void*, kDepth>>& ptrs,
                        const std::vector<int64_t>& sizes, Launch&& launch) {
  constexpr int kMax = TensorListArgs<kDepth>::kMaxTensors;
  for (const MultiTensorLaunch& l :
       plan_multi_tensor_launches(sizes, kMax, kMultiTensorMaxBlocks, kMultiTensorChunk)) {
    TensorListArgs<kDepth> args{};
    for (std::size_t t = 0; t < l.tensors.size(); ++t) {
      for (int s = 0; s < kDepth; ++s) args.ptrs[s][t] = ptrs[l.tensors[t]][s];
      args.sizes[t] = sizes[l.tensors[t]];
    }
    for (std::size_t b = 0; b < l.block_tensor.size(); ++b) {
      args.block_tensor[b] = static_cast<uint8_t>(l.block_tensor[b]);
      args.block_chunk[b] = l.block_chunk[b];
    }
    launch(args, static_cast<unsigned>(l.block_tensor.size()));
    CHECK_CUDA_LAUNCH();
  }
}

}  // namespace minitrain
