// Top-k accuracy counts on the host: one pass over each row's logits.

#include "train/class_metrics.h"

#include "core/error.h"

namespace minitrain {

ClassCounts count_correct(const Tensor& logits, const Tensor& labels, int64_t k,
                          int64_t ignore_index) {
  MT_CHECK_AS(ShapeError, logits.ndim() == 2 && labels.numel() == logits.size(0),
              "count_correct: logits ", logits.shape(), " and labels ", labels.shape(),
              " do not fit (expected [N, C] and N labels)");
  const int64_t n = logits.size(0), classes = logits.size(1);
  const std::vector<double> z = logits.to_double_vector(), y = labels.to_double_vector();
  ClassCounts c;
  for (int64_t i = 0; i < n; ++i) {
    const double label = y[static_cast<std::size_t>(i)];
    if (label == static_cast<double>(ignore_index)) continue;
    const auto t = static_cast<int64_t>(label);
    c.counted += 1;
    if (t < 0 || t >= classes) continue;  // not a class: never correct (the loss refuses it)
    const double* row = z.data() + i * classes;
    int64_t rank = 0;
    for (int64_t j = 0; j < classes; ++j) rank += row[j] > row[t] || (row[j] == row[t] && j < t);
    c.correct += rank < 1;
    c.topk_correct += rank < k;
  }
  return c;
}

}  // namespace minitrain
