// Held-out evaluation: batches gathered straight from the data set (no DataLoader, no shuffling),
// sums in double, divided once at the end.

#include "train/validation.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cast.h"
#include "train/class_metrics.h"

namespace minitrain {
double mean_divisor(const Tensor& y_host, const LossOptions& o, TargetKind kind) {
  if (kind == TargetKind::Values) return static_cast<double>(y_host.numel());
  double d = 0;
  for (float v : y_host.to_vector<float>()) {
    if (v == static_cast<float>(o.ignore_index)) continue;
    d += o.class_weights.empty() ? 1.0 : o.class_weights.at(static_cast<std::size_t>(v));
  }
  return d;
}

std::vector<int64_t> strided_rows(int64_t n, int rank, int world) {
  std::vector<int64_t> rows;
  for (int64_t i = rank; i < n; i += world) rows.push_back(i);
  return rows;
}

Validator::Validator(std::shared_ptr<const Dataset> data, ValidatorOptions options)
    : data_(std::move(data)), options_(std::move(options)) {
  MT_CHECK_AS(ValueError, data_ != nullptr && data_->size() > 0,
              "Validator: the held-out data set is empty");
  MT_CHECK_AS(ValueError, options_.batch_size >= 1, "Validator: batch_size must be >= 1, got ",
              options_.batch_size);
  MT_CHECK_AS(ValueError, options_.topk >= 1, "Validator: topk must be >= 1, got ", options_.topk);
  rows_ = options_.rows;
  if (rows_.empty() && !options_.sum_over_ranks) rows_ = strided_rows(data_->size(), 0, 1);
  for (int64_t r : rows_)
    MT_CHECK_AS(ValueError, r >= 0 && r < data_->size(), "Validator: row ", r,
                " is outside the held-out data's ", data_->size(), " rows");
  LossOptions sum = options_.loss;
  sum.reduction = Reduction::Sum;
  loss_ = make_loss(sum);
}

ValMetrics Validator::evaluate(Module& model) {
  const bool classifier = loss_->target_kind() == TargetKind::ClassIndices;
  // loss sum, mean divisor, rows, correct, top-k correct, counted, ranks stopped by a signal
  std::vector<double> sums(7, 0.0);
  model.eval();
  const auto n = static_cast<int64_t>(rows_.size());
  for (int64_t begin = 0; begin < n; begin += options_.batch_size) {
    // A stop request ends the evaluation between batches, not after every held-out row (issue 30).
    if (options_.stop_requested != nullptr && options_.stop_requested->load() != 0) {
      sums[6] = 1;
      break;
    }
    const int64_t k = std::min(options_.batch_size, n - begin);
    const std::vector<int64_t> idx(rows_.begin() + begin, rows_.begin() + begin + k);
    Tensor x = Tensor::empty({k, data_->feature_dim()});
    Tensor y = Tensor::empty({k, data_->target_dim()});
    data_->gather(idx, x, y);
    const Tensor out = model.forward(x.to(options_.device));
    // A 16-bit model's prediction (mixed precision) is scored in float32, as in training.
    const Tensor pred = is_half(out.dtype()) ? cast(out, DType::Float32) : out;
    const Tensor target = y.to(pred.device());
    sums[0] += loss_->forward(pred, target).item();
    sums[1] += mean_divisor(y, options_.loss, loss_->target_kind());
    sums[2] += static_cast<double>(k);
    if (classifier) {
      const ClassCounts c = count_correct(pred, y, options_.topk, options_.loss.ignore_index);
      sums[3] += c.correct;
      sums[4] += c.topk_correct;
      sums[5] += c.counted;
    }
  }
  model.train();
  if (options_.sum_over_ranks) options_.sum_over_ranks(sums);
  ValMetrics m;
  m.rows = static_cast<int64_t>(sums[2]);
  m.loss = sums[0] / sums[1];  // 0/0 (every row ignored) is NaN, as torch's mean
  m.topk = options_.topk;
  m.interrupted = sums[6] > 0;
  if (classifier) {
    m.accuracy = sums[5] > 0 ? sums[3] / sums[5] : std::numeric_limits<double>::quiet_NaN();
    if (options_.topk > 1)
      m.topk_accuracy = sums[5] > 0 ? sums[4] / sums[5] : std::numeric_limits<double>::quiet_NaN();
  }
  return m;
}

}  // namespace minitrain
