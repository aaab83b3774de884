#pragma once
// Cross-entropy over class indices, torch.nn.CrossEntropyLoss semantics: logits [N, C], one class
// index per row (shape [N] or [N, 1], stored in the logits' float dtype), class weights,
// label smoothing, ignore_index and reduction mean (the default), sum or none. A fused,
// numerically stable log-softmax + NLL: each row's logits are read once for the max, once for the
// sum of exponentials, and once more for the gradient (softmax minus the smoothed one-hot, times
// the weights), all from cache; see kernels/loss/loss_math.h for the formulas. Bound by memory for
// large C, by latency for small C.
//
// Note [cross_entropy's targets on the host]: the class indices (N values) and the class weights
// (C values) are copied to the host by every entry point, to check each index (a ValueError
// naming the row, the value and C) and to form the mean's divisor, sum over non-ignored rows of
// w[y_i], in one fixed order. On a GPU this is a small synchronous copy per call; the logits
// stay on the device.

#include <cstdint>

#include "core/tensor.h"
#include "kernels/loss/loss_math.h"
#include "kernels/loss/reduction.h"

struct CUstream_st;

namespace minitrain {

struct CrossEntropySpec {
  /// Undefined (all 1) or [C] of the logits' device and dtype, each >= 0 (torch's weight=).
  Tensor class_weights;
  double label_smoothing = 0.0;  ///< in [0, 1]
  int64_t ignore_index = -100;   ///< rows with this target count for nothing
};

/// Mean/Sum: out is 0-d; None: out is [N], 0 for ignored rows. Mean divides by the sum of the
/// weights of the non-ignored rows' targets (their count without weights): NaN when every row is
/// ignored, as torch's 0/0. Sums are in double, in row order: bit-identical run to run.
/// ShapeError for logits not [N, C], classes not [N] or [N, 1], class_weights not [C];
/// ValueError naming the row, its value and C for a class index that is not a whole number in
/// [0, C) nor ignore_index, and for label_smoothing outside [0, 1] or a negative weight.
void cross_entropy_forward(Tensor& out, const Tensor& logits, const Tensor& classes,
                           const CrossEntropySpec& spec, Reduction reduction = Reduction::Mean);
/// grad_logits = dloss/dlogits * g, g the 0-d grad_out for Mean/Sum or grad_out[i] ([N]) for
/// None; rows with ignore_index get 0. grad_logits may be logits.
void cross_entropy_backward(Tensor& grad_logits, const Tensor& grad_out, const Tensor& logits,
                            const Tensor& classes, const CrossEntropySpec& spec,
                            Reduction reduction = Reduction::Mean);
/// Both in one pass over the logits, bit for bit equal to forward and to backward with a grad_out
/// of ones. grad_logits may be logits.
void cross_entropy_forward_backward(Tensor& out, Tensor& grad_logits, const Tensor& logits,
                                    const Tensor& classes, const CrossEntropySpec& spec,
                                    Reduction reduction = Reduction::Mean);
/// The same into new tensors.
Tensor cross_entropy_forward(const Tensor& logits, const Tensor& classes,
                             const CrossEntropySpec& spec, Reduction reduction = Reduction::Mean);
Tensor cross_entropy_backward(const Tensor& grad_out, const Tensor& logits, const Tensor& classes,
                              const CrossEntropySpec& spec, Reduction reduction = Reduction::Mean);

// ---- implementations (float and double are instantiated) ----

/// What every row's loop needs besides its logits.
template <typename T>
struct CrossEntropyArgs {
  const T* classes;  ///< [N] class indices (validated), on the loop's device
  const T* weights;  ///< [C] class weights, or nullptr for all 1
  int64_t ignore_index;
  CrossEntropyCoefficients k;
};

/// What the loops produce; every pointer may be null (that output is skipped).
template <typename T>
struct CrossEntropyOutputs {
  double* row_loss;   ///< [N] per-row losses in double, for the mean/sum (0 for ignored rows)
  T* row_out;         ///< [N] per-row losses in T, for reduction none
  T* grad;            ///< [N, C] gradient
  const T* grad_out;  ///< the incoming gradient: [N] (per_row) or [1]; null for 1
  bool per_row;
  double inv_total;  ///< 1 / (sum of the non-ignored rows' weights) for mean, else 1
};

/// Whether a row's target is ignore_index (the same test on the host and the device).
template <typename T>
MT_HOST_DEVICE bool cross_entropy_ignored(T target, int64_t ignore_index) {
  return double(target) == double(ignore_index);
}

template <typename T>
void cross_entropy_rows_cpu(const T* logits, int64_t rows, int64_t cols,
                            const CrossEntropyArgs<T>& args, const CrossEntropyOutputs<T>& outs);
template <typename T>
void cross_entropy_rows_cuda(const T* logits, int64_t rows, int64_t cols,
                             const CrossEntropyArgs<T>& args, const CrossEntropyOutputs<T>& outs,
                             CUstream_st* stream);
/// out[0] = sum(row_loss[0..rows)) / divisor on the GPU, in a fixed order.
template <typename T>
void cross_entropy_sum_rows_cuda(T* out, const double* row_loss, int64_t rows, double divisor,
                                 CUstream_st* stream);

}  // namespace minitrain
