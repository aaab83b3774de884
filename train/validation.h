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

#include "core/buffer_slot.h"
#include "data/dataset.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "train/device_totals.h"
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
  /// On a GPU, held-out rows (features and targets as float32) up to this many bytes are copied
  /// there once and kept for every evaluation; more are copied batch by batch.
  int64_t resident_bytes = int64_t{256} << 20;
};

/// On a GPU (issue 35) an evaluation reads the device once: the held-out rows stay on the device
/// between evaluations (up to ValidatorOptions::resident_bytes; larger sets are copied batch by
/// batch, each copy a wait), each batch's loss and counts are added in device memory
/// (train/device_totals.h's DeviceSums, in batch order, so the host's bits), cross-entropy checks
/// the labels there, and one copy with one event wait brings the sums back at the end. On the CPU
/// it adds on the host.
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
  // One batch's rows: features on options_.device, targets on the host (for mean_divisor).
  struct Rows {
    Tensor x, y_host;
  };
  Rows batch_rows(int64_t begin, int64_t k);
  // The batch's targets on `device` (the predictions'): a view of the resident ones, or a copy.
  Tensor batch_targets(const Rows& rows, int64_t begin, Device device);
  // `host` on `device`: on a GPU copied into a buffer of `slot`, else Tensor::to.
  static Tensor on_device(BufferSlot& slot, const Tensor& host, Device device);
  // The loop over the batches: adds into `sums` (the host's) or into on_device_.
  void evaluate_batches(Module& model, std::vector<double>& sums, bool& added_on_device,
                        int64_t& classes);
  // The batch's loss and counts added on the device (the labels checked there too).
  void add_on_device(const Tensor& pred, const Tensor& target);

  std::shared_ptr<const Dataset> data_;
  ValidatorOptions options_;
  std::vector<int64_t> rows_;
  std::unique_ptr<Loss> loss_;  // reduction sum
  // ---- on a GPU (issue 35) ----
  Tensor x_resident_, y_host_;  // every row, gathered once: features on the GPU, targets here
  Tensor y_resident_;           // the targets on the predictions' device
  // Note [buffers that live across steps] (core/buffer_slot.h): a batch's rows copied to the
  // device when the set is not resident, and a 16-bit prediction widened, rewritten batch after
  // batch; with the loss's own slots an evaluation after the first allocates nothing.
  BufferSlot x_batch_, y_batch_, widened_pred_;
  // loss, correct, counted, top-k correct, the label check (3): kSums below
  std::unique_ptr<DeviceSums> on_device_;
};

/// torch's divisor of a mean over one batch of targets (on the host): the element count for value
/// targets, the sum of the class weights of the rows that are not ignore_index for class targets.
/// 0: the batch has nothing to count (its mean is torch's 0/0, NaN).
double mean_divisor(const Tensor& y_host, const LossOptions& o, TargetKind kind);

/// Rank `rank`'s share of `n` rows under `world` ranks: rank, rank + world, ... (possibly none).
std::vector<int64_t> strided_rows(int64_t n, int rank, int world);

}  // namespace minitrain
