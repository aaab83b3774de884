#pragma once
// Held-out evaluation during training (--val-data, --val-split): the model in eval mode over
// every held-out row, the training loss's mean over them and, for classifiers, accuracy. It reads
// no random numbers and changes no weight, so a run that validates trains bit for bit as one that
// does not. Under ddp each rank evaluates its own rows (r, r + W, ...: every row once, none
// padded) and the sums are added over the ranks before anything is divided.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "data/dataset.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "train/step_stats.h"

namespace minitrain {

struct ValidatorOptions {
  LossOptions loss;  ///< the training loss (its reduction is taken as mean)
  int64_t batch_size = 1024;
  Device device = Device::cpu();  ///< where the model takes its input
  int64_t topk = 1;               ///< classifiers: also count top-k when > 1
  /// The rows this process evaluates; empty: all.
  std::vector<int64_t> rows;
  /// Adds each entry of the vector over the ranks (ddp: an all-reduce SUM); null: one process.
  std::function<void(std::vector<double>&)> sum_over_ranks;
  /// Nonzero (a signal number, train/stop_signals.h) stops an evaluation at the next held-out
  /// batch: it returns ValMetrics::interrupted (on every rank when any rank stopped). Null: never.
  const std::atomic<int>* stop_requested = nullptr;
};

class Validator {
 public:
  /// ValueError for a null or empty data set, batch_size < 1, topk < 1 or a row out of range.
  Validator(std::shared_ptr<const Dataset> data, ValidatorOptions options);
  /// Every held-out row through `model` in eval mode (left in train mode after). The loss is the
  /// sum-reduced loss over all rows divided by torch's mean divisor: the element count for value
  /// targets, the sum of the class weights of the counted rows for class targets.
  ValMetrics evaluate(Module& model);
  int64_t rows() const noexcept { return static_cast<int64_t>(rows_.size()); }

 private:
  std::shared_ptr<const Dataset> data_;
  ValidatorOptions options_;
  std::vector<int64_t> rows_;
  std::unique_ptr<Loss> loss_;  // reduction sum
};

/// torch's divisor of a mean over one batch of targets (on the host): the element count for value
/// targets, the sum of the class weights of the rows that are not ignore_index for class targets.
/// 0: the batch has nothing to count (its mean is torch's 0/0, NaN).
double mean_divisor(const Tensor& y_host, const LossOptions& o, TargetKind kind);

/// Rank `rank`'s share of `n` rows under `world` ranks: rank, rank + world, ... (possibly none).
std::vector<int64_t> strided_rows(int64_t n, int rank, int world);

}  // namespace minitrain
