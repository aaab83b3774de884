#pragma once
// Multi-tensor apply: one kernel launch updates many tensors (an optimizer step over a model's
// parameter list), as apex's and torch's multi_tensor_apply do. Each launch carries, in its kernel
// arguments, a table of up to max_tensors(depth) tensors' pointers and sizes and up to
// kMultiTensorMaxBlocks (tensor, chunk) pairs: block b processes chunk block_chunk[b] (of
// kMultiTensorChunk elements) of tensor block_tensor[b]. A model of 16 tensors then costs one
// launch instead of 16, which is what bounds an optimizer step of small layers (launch latency,
// not bandwidth). The schedule is plain host code, so it is tested on machines without a GPU.

#include <cstdint>
#include <vector>

namespace minitrain {

/// Elements per block: 16K (64 KiB of float32 per operand, 64 elements a thread), sized so that
/// a 1024-wide model fills an H100 (issue 35): mlp:1024,1024,1024,1's 6 tensors are 64 + 1 + 64 +
/// 1 + 1 + 1 = 132 blocks, one per SM of its 132, where apex's 64K gave 36 (a quarter of the
/// SMs idle through the optimizer step). Every kernel on the plan is elementwise and a chunk
/// starts 16-byte aligned when its tensor does, so the chunk size changes no result.
inline constexpr int64_t kMultiTensorChunk = 16384;
/// Blocks per launch, and tensors per launch by depth (operands per tensor: 2 for SGD without
/// momentum ... 5 for Adam with amsgrad): apex's table, sized so the argument table stays under
/// the 4 KiB kernel-parameter limit.
inline constexpr int kMultiTensorMaxBlocks = 320;
constexpr int multi_tensor_max_tensors(int depth) {
  return depth <= 1 ? 110 : depth == 2 ? 64 : depth == 3 ? 48 : depth == 4 ? 36 : 30;
}

/// One launch of the schedule.
struct MultiTensorLaunch {
  std::vector<int64_t> tensors;       ///< indices into the caller's tensor list
  std::vector<int32_t> block_tensor;  ///< per block: a position in `tensors`
  std::vector<int32_t> block_chunk;   ///< per block: the chunk of that tensor
};

/// The launches that cover every element of tensors of `sizes` exactly once, in order; empty
/// tensors are skipped. A tensor whose chunks do not fit in one launch continues in the next.
/// Throws ValueError for max_tensors or max_blocks < 1, chunk < 1 or a negative size.
std::vector<MultiTensorLaunch> plan_multi_tensor_launches(const std::vector<int64_t>& sizes,
                                                          int max_tensors, int max_blocks,
                                                          int64_t chunk);

}  // namespace minitrain
