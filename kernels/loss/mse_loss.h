#pragma once
// Mean squared error, torch.nn.functional.mse_loss semantics: loss = reduce((pred - target)^2)
// with reduction mean (the default), sum, none or batchmean, and its gradient with respect to
// pred.
// Memory-bound: two reads per element; mean and sum add a reduction to one number.

#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "kernels/loss/reduction.h"

struct CUstream_st;

namespace minitrain {

class BufferSlot;

/// pred and target of one shape. Mean/Sum/BatchMean: out is 0-d (shape []); None: out has pred's
/// shape; the sum is divided by reduction_divisor (kernels/loss/reduction.h).
/// Sums accumulate in double and combine in a fixed order: results are bit-identical run to run.
/// The mean of zero elements is NaN, as in torch.
void mse_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target,
                      Reduction reduction = Reduction::Mean);
/// grad_pred = norm * (pred - target) * g, norm = 2 / reduction_divisor (2/n for Mean); g is the
/// 0-d grad_out for Mean/Sum/BatchMean, grad_out[i] (pred's shape) for None. grad_pred may be pred.
void mse_loss_backward(Tensor& grad_pred, const Tensor& grad_out, const Tensor& pred,
                       const Tensor& target, Reduction reduction = Reduction::Mean);
/// Loss and gradient from one read of pred and target (the training step's pair of calls fused):
/// out as mse_loss_forward(out, pred, target, reduction) and grad_pred as mse_loss_backward with
/// a grad_out of ones, bit for bit (same per-element math, same summation order).
/// grad_pred has pred's shape and may be pred.
void mse_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                               const Tensor& target, Reduction reduction = Reduction::Mean);
/// The same with the reduction's scratch on a GPU (kMseReduceBlocks doubles) from `workspace`,
/// a slot its caller keeps across calls, instead of a new buffer per call (Note [buffers that
/// live across steps] in core/buffer_slot.h).
void mse_loss_forward_backward(Tensor& out, Tensor& grad_pred, const Tensor& pred,
                               const Tensor& target, Reduction reduction, BufferSlot& workspace);
/// mse_loss_forward with the reduction's scratch on a GPU from `workspace`, as above.
void mse_loss_forward(Tensor& out, const Tensor& pred, const Tensor& target, Reduction reduction,
                      BufferSlot& workspace);
/// The same into new tensors.
Tensor mse_loss_forward(const Tensor& pred, const Tensor& target,
                        Reduction reduction = Reduction::Mean);
Tensor mse_loss_backward(const Tensor& grad_out, const Tensor& pred, const Tensor& target,
                         Reduction reduction = Reduction::Mean);

// ---- implementations (float and double are instantiated) ----

/// out[0] = sum((pred - target)^2) / divisor, accumulated in double.
template <typename T>
void mse_loss_reduce_cpu(T* out, const T* pred, const T* target, int64_t n, double divisor);
/// out[i] = (pred[i] - target[i])^2.
template <typename T>
void mse_loss_elementwise_cpu(T* out, const T* pred, const T* target, int64_t n);
/// grad_pred[i] = norm * (pred[i] - target[i]) * grad_out[per_element ? i : 0].
template <typename T>
void mse_loss_backward_cpu(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                           int64_t n, T norm, bool per_element);

/// Mean/Sum (per_element false): out[0] = sum((pred - target)^2) / divisor and
/// grad_pred[i] = norm * (pred[i] - target[i]) * 1; None: out[i] = (pred[i] - target[i])^2 too.
template <typename T>
void mse_loss_forward_backward_cpu(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                   double divisor, T norm, bool per_element);

/// Partial sums the CUDA reduction leaves in its workspace (doubles), one per block of pass 1.
inline constexpr int kMseReduceBlocks = 1024;
/// `workspace` holds kMseReduceBlocks doubles on the same device.
template <typename T>
void mse_loss_reduce_cuda(T* out, const T* pred, const T* target, int64_t n, double divisor,
                          double* workspace, CUstream_st* stream);
/// `workspace` as for mse_loss_reduce_cuda when !per_element (unused otherwise).
template <typename T>
void mse_loss_forward_backward_cuda(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                    double divisor, T norm, bool per_element, double* workspace,
                                    CUstream_st* stream);
/// Reduction none's fused forward + backward in 16-byte packs (float4 / double2) where pred,
/// target, out and grad_pred are 16-byte aligned, the last n % 4 (or 2) elements one by one; the
/// scalar kernel otherwise. The per-element expressions are mse_loss_forward_backward_cpu's, so
/// the bits are too. A variant benchmarked against the scalar kernel by `minitrain bench op
/// mse_none_forward_backward` (kernels/op_bench/ops/mse_loss_ops.cpp).
template <typename T>
void mse_loss_none_fused_vec4_cuda(T* out, T* grad_pred, const T* pred, const T* target, int64_t n,
                                   T norm, CUstream_st* stream);
template <typename T>
void mse_loss_elementwise_cuda(T* out, const T* pred, const T* target, int64_t n,
                               CUstream_st* stream);
template <typename T>
void mse_loss_backward_cuda(T* grad_pred, const T* grad_out, const T* pred, const T* target,
                            int64_t n, T norm, bool per_element, CUstream_st* stream);

}  // namespace minitrain
