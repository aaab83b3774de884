// Checking and counting class labels on the host: a few passes over one column.

#include "data/class_labels.h"

#include <cmath>

#include "core/error.h"

namespace minitrain {

void check_class_labels(const Tensor& labels, int64_t classes, int64_t ignore_index,
                        const std::string& source) {
  const bool column = labels.ndim() == 1 || (labels.ndim() == 2 && labels.size(1) == 1);
  MT_CHECK_AS(ShapeError, column, source, " holds targets of shape ", labels.shape(),
              "; a classifier takes one class label per row (shape [N] or [N, 1])");
  MT_CHECK_AS(ValueError, classes <= kMaxExactClassLabel, source, ": a classifier of ", classes,
              " classes, but class labels are float32, which counts whole numbers exactly only up "
              "to 2^24: at most ",
              kMaxExactClassLabel, " classes");
  const std::vector<double> v = labels.to_double_vector();
  for (std::size_t row = 0; row < v.size(); ++row) {
    const double y = v[row];
    if (y == static_cast<double>(ignore_index)) continue;
    if (!(y >= 0 && y < static_cast<double>(classes) && y == std::floor(y)))
      MT_THROW(ValueError, source, ": row ", row, " (0-based) has label ", y,
               ", but a label must be an integer class index in [0, ", classes,
               ") for a model with ", classes, " outputs (or ", ignore_index,
               ", the --ignore-index, for a row to skip)");
  }
}

std::vector<int64_t> label_values(const Tensor& labels) {
  std::vector<int64_t> out;
  for (double y : labels.to_double_vector()) out.push_back(static_cast<int64_t>(y));
  return out;
}

std::vector<int64_t> class_counts(const Tensor& labels, int64_t classes, int64_t ignore_index) {
  std::vector<int64_t> counts(static_cast<std::size_t>(classes), 0);
  for (int64_t y : label_values(labels))
    if (y != ignore_index) ++counts[static_cast<std::size_t>(y)];
  return counts;
}

std::vector<double> balanced_class_weights(const std::vector<int64_t>& counts) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  const double classes = static_cast<double>(counts.size());
  std::vector<double> w;
  for (int64_t c : counts)
    w.push_back(c > 0 ? static_cast<double>(n) / (classes * static_cast<double>(c)) : 1.0);
  return w;
}

}  // namespace minitrain
