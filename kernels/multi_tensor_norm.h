#pragma once
// Gradient clipping over many tensors at once (torch's foreach clip_grad_norm_, issue 35): the
// total sum of squares of a list of tensors in two launches (every tensor's per-block partials,
// then one block that folds them tensor by tensor, in list order), and the clipping scale of the
// whole list in one multi-tensor launch (kernels/multi_tensor_apply.h). A model of 6 tensors then
// costs 3 launches where the per-tensor path (squared_norm, a widening cast, an add and a scale
// per tensor) cost 29. Memory-bound for large tensors; for small ones the launches are the cost.
//
// Note [the per-tensor norm's bits]: the total is bit for bit the per-tensor path's,
//   total = double(T_0(s_0)) + double(T_1(s_1)) + ... (left to right, in double),
// where s_k, tensor k's sum of squares, is accumulated in double with squared_norm's partition
// (reduce.h: on the GPU reduce_cuda_partials(n) blocks of kBlock threads, each thread's
// grid-stride slice, the block's shuffle tree, then the one-block fold of the partials; on the
// CPU chunks of kReducePartialChunk folded in order) and then rounded to the tensor's own type
// T_k, as squared_norm(x) returns it. The pass-1 code is the same device function as the
// one-tensor kernel's (kernels/reduce_partials.cuh). Reproducing the rounding to T_k (float32
// for float32 gradients) is what keeps clipped training runs on the bits they had.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

class BufferSlot;

// ---- entry points ----

/// total (a 0-d float64 tensor on the tensors' device) = the sum of squares of every tensor of
/// `xs` (float32 or float64, mixed allowed, all on total's device), with the bits of
/// squared_norm per tensor, widened, then added in list order (Note [the per-tensor norm's
/// bits]); 0 for an empty list. On a GPU: two launches per kNormMaxTensors tensors, one
/// allocation (the partials), no host read, so it can be captured in a CUDA graph.
/// DeviceError / DTypeError name the offending index.
void squared_norm_multi(Tensor& total, const std::vector<Tensor>& xs);
/// The same with the partials on a GPU from `partials`, a slot its caller keeps across calls
/// (Note [buffers that live across steps] in core/buffer_slot.h): no allocation once warm.
void squared_norm_multi(Tensor& total, const std::vector<Tensor>& xs, BufferSlot& partials);

/// clip_scale_(x, sum_sq, max_norm) (kernels/reduce.h) for every x of `xs`: multiplied by
/// T(max_norm / (sqrt(*sum_sq) + 1e-6)) when that is below 1 or NaN, else left untouched. One
/// multi-tensor launch per dtype on a GPU (more past multi_tensor_max_tensors(1) tensors).
void clip_scale_multi_(std::vector<Tensor>& xs, const Tensor& sum_sq, double max_norm);

// ---- CPU and CUDA implementations (raw pointers, contiguous) ----

/// Tensors per launch of the norm's two kernels (their argument tables stay under 4 KiB).
inline constexpr int kNormMaxTensors = 100;

/// The raw operands of squared_norm_multi: tensor k is sizes[k] elements at ptrs[k], double when
/// is_double[k] (else float).
struct NormList {
  std::vector<const void*> ptrs;
  std::vector<int64_t> sizes;
  std::vector<bool> is_double;
};

/// One fork/join over every chunk of every tensor, then the per-tensor folds in order.
void squared_norm_multi_cpu(double* total, const NormList& list);
/// Doubles of device scratch squared_norm_multi_cuda needs for `list` (at least 1).
int64_t squared_norm_multi_cuda_partials(const NormList& list);
void squared_norm_multi_cuda(double* total, const NormList& list, double* partials,
                             CUstream_st* stream);

template <typename T>
void clip_scale_multi_cpu(const std::vector<T*>& xs, const std::vector<int64_t>& sizes,
                          const double* sum_sq, double max_norm);
template <typename T>
void clip_scale_multi_cuda(const std::vector<T*>& xs, const std::vector<int64_t>& sizes,
                           const double* sum_sq, double max_norm, CUstream_st* stream);

}  // namespace minitrain
