#pragma once
// How a loss reduces its per-element values to what it returns: torch's `reduction=` argument.
// Every loss kernel (kernels/loss/mse_loss.h, kernels/loss/pointwise_loss.h,
// kernels/loss/cross_entropy.h) and every Loss (nn/loss.h) takes one.

#include <string>

namespace minitrain {

/// BatchMean is torch's 'batchmean': the sum divided by the first extent (the batch), which only
/// kl_div takes (as torch.nn.KLDivLoss alone does); every other loss refuses it.
enum class Reduction { Mean, Sum, None, BatchMean };

/// "mean" | "sum" | "none" | "batchmean"; throws ValueError listing them otherwise.
Reduction parse_reduction(const std::string& name);
const char* reduction_name(Reduction r);
/// ValueError "<op>: reduction 'batchmean' is kl_div's ..." for BatchMean: for the losses that
/// reduce by mean, sum or none only.
void check_not_batchmean(const char* op, Reduction r);

}  // namespace minitrain
