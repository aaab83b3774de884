#pragma once
// Class labels of a classification data set: one per row, stored as float32 (Note [class indices
// as floats] in nn/loss.h), checked once when the data is read rather than at some later batch.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minitrain {

/// The largest integer up to which float32 holds every integer exactly (2^24): class labels beyond
/// it would round to a neighbour (16777217 -> 16777216), so a classifier has at most this many
/// classes and a label is at most this in magnitude.
constexpr int64_t kMaxExactClassLabel = int64_t{1} << 24;

/// `labels` ([N] or [N, 1], float) must hold integers in [0, classes) or `ignore_index`.
/// ValueError naming `source` (a file), the row (0-based) and the value otherwise, or when
/// `classes` exceeds kMaxExactClassLabel; ShapeError when `labels` has more than one column.
void check_class_labels(const Tensor& labels, int64_t classes, int64_t ignore_index,
                        const std::string& source);

/// Rows per class (ignored rows not counted); labels already checked.
std::vector<int64_t> class_counts(const Tensor& labels, int64_t classes, int64_t ignore_index);

/// torch's usual "balanced" weights (sklearn's compute_class_weight): n / (classes x count[c])
/// over the n counted rows; a class with no rows gets 1 (it is never a target, so its weight only
/// enters label smoothing's sum).
std::vector<double> balanced_class_weights(const std::vector<int64_t>& counts);

/// The labels as integers (labels already checked).
std::vector<int64_t> label_values(const Tensor& labels);

}  // namespace minitrain
