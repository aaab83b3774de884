#pragma once
// How a loss reduces its per-element values to what it returns: torch's `reduction=` argument.
// Every loss kernel (kernels/loss/mse_loss.h, kernels/loss/pointwise_loss.h,
// kernels/loss/cross_entropy.h) and every Loss (nn/loss.h) takes one.

#include <cstdint>
#include <string>

namespace minitrain {

class Shape;

/// BatchMean is torch's reduction='batchmean': the sum divided by the first extent (the
/// batch), so the loss is per sample whatever the number of columns. Every elementwise loss (mse
/// and the pointwise ones) takes it; cross_entropy, whose mean is already per row (or per weight),
/// refuses it.
enum class Reduction { Mean, Sum, None, BatchMean };

/// "mean" | "sum" | "none" | "batchmean"; throws ValueError listing them otherwise.
Reduction parse_reduction(const std::string& name);
const char* reduction_name(Reduction r);

/// What the sum of the per-element losses of `pred_shape` is divided by: the element count for
/// Mean, the first extent for BatchMean (1 for a 0-d pred, where torch's batchmean is the sum),
/// 1 for Sum and None. The gradient's norm is its inverse.
double reduction_divisor(Reduction r, const Shape& pred_shape);

/// ValueError "<op>: reduction 'batchmean' ..." for BatchMean: for a loss that reduces by mean,
/// sum or none only (cross_entropy).
void check_not_batchmean(const char* op, Reduction r);

}  // namespace minitrain
