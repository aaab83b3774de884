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
//
// Note [cross_entropy's targets on the device]: a caller that checked its labels once (the
// trainer checks them at load) may skip that copy by handing a `target_check` tensor (float64 [3]
// on the logits' CUDA device). Nothing is then read by the host: one kernel forms the mean's
// divisor into a device scratch and, if the check holds no bad target yet, writes the first bad
// row into it: {1, row, target}; the rows kernel reads the divisor from device memory and gives
// a bad row a NaN loss and gradient (it never indexes with it). Without class weights the divisor
// is a count of the non-ignored rows (whole numbers: exact in any order, so a block's fold has
// the host's bits). With them it is a sum of doubles, whose bits depend on the order: one thread
// adds w[y_i] in row order from 0.0, as the host loop does, so the same bits (N additions in one
// thread: microseconds for a batch of thousands); the same thread adds the weights' total (label
// smoothing's W) in class order and checks each weight, recording the first negative (or NaN)
// one as {2, class, weight} (before any bad target, as the host checks the weights first). The
// caller reads the check later (with the loss) and throw_bad_cross_entropy_target names the row (or
// the weight) as the host check would. On the CPU the call checks on the host as above.
//
// Note [a batch that counts nothing, on the device]: a batch whose every row is ignore_index or
// of a class weighted 0 has torch's 0/0 mean (a NaN loss and gradient); the trainer lets it
// contribute nothing (issue 30): no loss, a zero gradient, and no update from a step that counted
// nothing. Deciding that on the host needs the labels. With `batch_count` the device decides: the
// check kernel adds 1 to the count when the divisor is above 0 (and sets `skip_flag` from the
// count, for the optimizer to skip on: Note [skip on the device] in
// kernels/optim/skip_on_device.h), the rows kernel treats every row of a batch with divisor 0 as
// ignored (loss 0, gradient 0) and the mean is 0. A loss of 0 added to the step's float64 sum
// leaves its bits as the host's skipped addition does, and the step's mean divides by the
// device's count when read (train/device_totals.h).

#include <cstdint>

#include "core/tensor.h"
#include "kernels/loss/loss_math.h"
#include "kernels/loss/reduction.h"

struct CUstream_st;

namespace minitrain {

class BufferSlot;

struct CrossEntropySpec {
  /// Undefined (all 1) or [C] of the logits' device and dtype, each >= 0 (torch's weight=).
  Tensor class_weights;
  double label_smoothing = 0.0;  ///< in [0, 1]
  int64_t ignore_index = -100;   ///< rows with this target count for nothing
  /// Undefined: check the targets on the host. Else float64 [3] on the logits' CUDA device,
  /// {0, 0, 0} until a bad target (or class weight) is met (Note [cross_entropy's targets on the
  /// device]).
  Tensor target_check;
  /// Only with target_check: undefined, or float64 [1] on the logits' device (Note [a batch that
  /// counts nothing, on the device]): the call adds 1 to it when its mean's divisor is above 0;
  /// when the divisor is 0 (every row ignore_index or of a class weighted 0) the loss is 0 and the
  /// gradient zero instead of torch's 0/0 NaN, the trainer's rule for such a batch (issue 30).
  Tensor batch_count;
  /// Only with batch_count: undefined, or float32 [1] on that device, set to 1 while batch_count
  /// holds 0 and to 0 otherwise, after the addition: an optimizer's skip flag
  /// (Optimizer::set_found_inf) for a step none of whose batches counted.
  Tensor skip_flag;
  /// Null: the GPU path's scratch (the rows' losses, the counted divisor) is new on every call;
  /// else it comes from this slot, kept by the caller across calls (core/buffer_slot.h).
  BufferSlot* workspace = nullptr;
};

/// Whether a call with `spec` on `logits` checks its targets on the device (no host copy).
bool cross_entropy_checks_on_device(const Tensor& logits, const CrossEntropySpec& spec);

/// ValueError naming the row and target of a `target_check` that recorded one ({1, row, value},
/// read on the host), or the class and weight of a negative weight ({2, class, weight}), worded
/// as the host check's; returns when check[0] == 0.
void throw_bad_cross_entropy_target(const char* op, const double* check, int64_t classes,
                                    int64_t ignore_index);

/// Adds the top-1 accuracy counts of logits [N, C] against classes ([N] or [N, 1], the logits'
/// dtype and device) to counts (float64 [2] on that device): {rows whose class is the first
/// maximum of its row (torch.argmax's), rows whose class is not ignore_index}. A target that is
/// not in [0, C) is counted and never correct (train/class_metrics.h's count_correct with k = 1).
/// Queued on the device: no host read. Integer counts in float64: exact in any order. With
/// `topk_counts` (float64 [1] on that device) it also adds the rows whose class ranks below `k`
/// (count_correct's top-k: the classes with a larger logit, and those with an equal one and a
/// smaller index, number fewer than k).
void cross_entropy_count_correct(Tensor& counts, const Tensor& logits, const Tensor& classes,
                                 int64_t ignore_index, int64_t k = 1,
                                 Tensor* topk_counts = nullptr);

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
  /// Non-null (CUDA, weights checked on the device): k.weight_total is read there.
  const double* weight_total = nullptr;
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
  /// Non-null (CUDA, targets checked on the device): inv_total is 1 / *divisor, read there.
  const double* divisor;
  /// Non-null (CUDA, a batch_count given): the batch's divisor; 0 makes every row ignored.
  const double* counted_divisor = nullptr;
};

/// Whether a row's target is ignore_index (the same test on the host and the device).
template <typename T>
MT_HOST_DEVICE bool cross_entropy_ignored(T target, int64_t ignore_index) {
  return double(target) == double(ignore_index);
}

/// Whether a non-ignored target is a class index: a whole number in [0, cols).
template <typename T>
MT_HOST_DEVICE bool cross_entropy_valid_target(T target, int64_t cols) {
  const double v = double(target);
  return v >= 0 && v < double(cols) && double(static_cast<int64_t>(v)) == v;
}

/// Whether row i's target is top-1 (the first maximum of its row); target in [0, cols).
template <typename T>
MT_HOST_DEVICE bool cross_entropy_top1(const T* row, int64_t cols, int64_t target) {
  for (int64_t j = 0; j < cols; ++j)
    if (row[j] > row[target] || (row[j] == row[target] && j < target)) return false;
  return true;
}

/// Whether class `target` ranks below k in its row: fewer than k classes have a larger logit or
/// an equal one and a smaller index (train/class_metrics.h's rule); target in [0, cols).
template <typename T>
MT_HOST_DEVICE bool cross_entropy_in_topk(const T* row, int64_t cols, int64_t target, int64_t k) {
  int64_t rank = 0;
  for (int64_t j = 0; j < cols && rank < k; ++j)
    rank += row[j] > row[target] || (row[j] == row[target] && j < target);
  return rank < k;
}

/// The accuracy counts of some rows: {top-1 rows, non-ignored rows, rows ranked below k}. Whole
/// numbers in double: exact in any order of addition.
struct CrossEntropyRowCounts {
  double correct = 0, counted = 0, in_topk = 0;
};

/// Adds row i's share to `c`, the one body of cross_entropy_count_correct's CPU loop and CUDA
/// kernel: nothing for an ignored row; else it is counted, and correct (and with `topk` in the
/// top k) only when its target is in [0, cols).
template <typename T>
MT_HOST_DEVICE void cross_entropy_count_row(CrossEntropyRowCounts& c, const T* logits,
                                            const T* classes, int64_t i, int64_t cols,
                                            int64_t ignore_index, int64_t k, bool topk) {
  const T t = classes[i];
  if (cross_entropy_ignored(t, ignore_index)) return;
  c.counted += 1;
  const double v = double(t);
  if (!(v >= 0 && v < double(cols))) return;
  const int64_t y = static_cast<int64_t>(v);
  c.correct += cross_entropy_top1(logits + i * cols, cols, y) ? 1 : 0;
  if (topk) c.in_topk += cross_entropy_in_topk(logits + i * cols, cols, y, k) ? 1 : 0;
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
/// The same with the divisor read from device memory (*divisor), the same fold.
/// With zero_when_none, a divisor of 0 gives 0 (a batch that counts nothing).
template <typename T>
void cross_entropy_mean_rows_cuda(T* out, const double* row_loss, int64_t rows,
                                  const double* divisor, CUstream_st* stream,
                                  bool zero_when_none = false);
/// Without weights: divisor[0] = the count of rows whose target is not ignore_index. With
/// weights ([cols]): divisor[0] = sum of weights[y_i] over those rows in row order and
/// divisor[1] = sum of the weights in class order, each from 0.0 in double, as the host's loops.
/// If check[0] == 0: a weight that is not >= 0 sets check = {2, first such class, its weight},
/// else a non-ignored target that is not a class index sets {1, first such row, its target}.
/// With batches (non-null): batches[0] += 1 when divisor[0] > 0; then with skip (non-null)
/// skip[0] = batches[0] == 0 (Note [a batch that counts nothing, on the device]).
template <typename T>
void cross_entropy_check_targets_cuda(double* divisor, double* check, const T* classes,
                                      const T* weights, int64_t rows, int64_t cols,
                                      int64_t ignore_index, CUstream_st* stream,
                                      double* batches = nullptr, float* skip = nullptr);
/// counts[0] += top-1 rows, counts[1] += non-ignored rows, and with topk non-null topk[0] +=
/// rows whose class ranks below k (cross_entropy_count_correct).
template <typename T>
void cross_entropy_count_correct_cpu(double* counts, double* topk, const T* logits,
                                     const T* classes, int64_t rows, int64_t cols,
                                     int64_t ignore_index, int64_t k);
template <typename T>
void cross_entropy_count_correct_cuda(double* counts, double* topk, const T* logits,
                                      const T* classes, int64_t rows, int64_t cols,
                                      int64_t ignore_index, int64_t k, CUstream_st* stream);

}  // namespace minitrain
