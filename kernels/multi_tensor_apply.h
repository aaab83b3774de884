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

/// Elements per block: 64K (256 KiB of float32 per operand), apex's default; large enough that a
/// block's work dwarfs its start-up, small enough that a 1M-element tensor spreads over 16 SMs.
inline constexpr int64_t kMultiTensorChunk = 65536;
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
