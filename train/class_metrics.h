#pragma once
// Accuracy of a classifier's logits against class labels, counted (not averaged) so that batches
// and ranks add up exactly: accuracy = correct / counted over all of them.

#include <cstdint>

#include "core/tensor.h"

namespace minitrain {

struct ClassCounts {
  double correct = 0;       ///< rows whose label is the top-1 class (torch.argmax's: first max)
  double topk_correct = 0;  ///< rows whose label is among the top k
  double counted = 0;       ///< rows whose label is not ignore_index
};

/// logits [N, C] (any float dtype and device; copied to the host), labels [N] or [N, 1] class
/// indices. A label's rank is the number of classes with a larger logit, plus those with an equal
/// logit and a smaller index (so ties go as argmax breaks them); top-k means rank < k.
ClassCounts count_correct(const Tensor& logits, const Tensor& labels, int64_t k,
                          int64_t ignore_index);

}  // namespace minitrain
