#pragma once
// What each training step adds up on the device (its batches' loss, its gradients' sum of
// squares), kept there and read only when the host needs a value: a log line, the progress line,
// an evaluation, a checkpoint, the run's end (issue 35). A read is one copy of every waiting
// step's slot into pinned memory, an event and one wait, instead of a blocking copy per step.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/device.h"
#include "core/stream.h"
#include "core/tensor.h"

namespace minitrain {

/// A few float64 running sums in device memory, added to by queued work and read together: one
/// copy into pinned memory, an event and one wait (a plain copy on the CPU). The held-out
/// evaluation's loss and counts (train/validation.cpp) stay here until its end.
class DeviceSums {
 public:
  /// `n` sums (>= 1) on `device`, all 0.
  DeviceSums(Device device, int64_t n);
  Device device() const noexcept { return device_; }
  int64_t size() const noexcept { return sums_.numel(); }
  /// Sums [first, first + n) as a float64 view on device(), for a kernel to add into.
  Tensor view(int64_t first, int64_t n) const;
  /// sums[i] += value, a 0-d (or one-element) float32/float64 tensor on device(), widened to
  /// float64 first (exact, as Tensor::item): the bits of the host's `sum += value.item()`.
  void add(int64_t i, const Tensor& value);
  /// Every sum, in order; then all are 0 again (queued after the copy).
  std::vector<double> read();

 private:
  Device device_;
  Tensor sums_;                  // [n] float64 on device_
  Tensor widened_;               // [1] float64 on device_: a float32 value, widened
  Tensor host_;                  // [n] float64, pinned on a GPU
  std::optional<Event> copied_;  // recorded after the copy into host_
};

/// One step's totals as read back.
struct StepTotals {
  double loss = 0.0;        ///< the mean of its batches' losses (their float64 sum / batches)
  double loss_sum = 0.0;    ///< that float64 sum (ddp adds it over the ranks)
  double grad_norm = -1.0;  ///< sqrt of the gradients' sum of squares; < 0: none was added
  /// The loss scaler's record of the step (GradScaler::update_queued), when one was written:
  bool scaled = false;
  double loss_scale = 0.0;   ///< the scale the step used
  bool skipped = false;      ///< its gradients overflowed: the optimizer skipped it
  double scale_after = 0.0;  ///< the scale for the next step
  /// A classifier's top-1 counts added on the device (class_counts()), when handed out:
  bool counted_rows = false;
  double correct = 0.0;  ///< rows whose label is the top-1 class
  double counted = 0.0;  ///< rows whose label is not ignore_index
  /// cross_entropy's check of the labels on the device (target_check()): {0 or 1, first bad
  /// row, its label} (Note [cross_entropy's targets on the device]).
  double target_check[3] = {0.0, 0.0, 0.0};
  /// The step's batches with a row to count, counted on the device (batch_count() handed out;
  /// Note [a batch that counts nothing, on the device]): `loss` is then loss_sum over this count,
  /// and 0 means the step counted nothing (no update was made).
  bool batches_on_device = false;
  double counted_batches = 0.0;
};

/// Device-side running totals, one slot per step not read yet. Each slot is float64 in device
/// memory; a float32 loss is widened and added in the order of the step's batches, so the mean
/// read back has the bits of the host's `sum += loss.item()` it replaces.
class DeviceTotals {
 public:
  static constexpr int64_t kDefaultCapacity = 64;  // a read at least every 64 steps

  /// The totals live on `device` (the loss's); `capacity` steps wait at most (>= 1).
  explicit DeviceTotals(Device device, int64_t capacity = kDefaultCapacity);

  Device device() const noexcept { return device_; }
  /// Opens the next step's slot, whose loss is divided by `batches` when read. Error when full.
  void begin_step(int64_t batches);
  /// The open step's divisor after all: the batches whose loss was added (a batch with no row to
  /// count adds none, issue 30); 0 reads as a NaN loss (torch's 0/0).
  void set_batches(int64_t batches);
  /// Adds a 0-d float32/float64 loss on device() to the open slot (queued: no wait).
  void add_loss(const Tensor& loss);
  /// Adds a 0-d float64 sum of squares on device() to the open slot's gradient total (queued).
  void add_grad_sum_sq(const Tensor& sum_sq);
  /// The open slot's loss-scaler record, float64 [4] on device() (kernels/optim/amp_math.h's
  /// kAmpRecordSize: scale used, flag, scale and tracker after), for GradScaler::update_queued to
  /// write; read() reports it.
  Tensor scaler_record();
  /// The open slot's top-1 counts, float64 [2] on device() ({correct, counted}), for
  /// cross_entropy_count_correct to add to; read() reports them.
  Tensor class_counts();
  /// The open slot's label check, float64 [3] on device(), for cross_entropy's target_check; read()
  /// reports it.
  Tensor target_check();
  /// The open slot's count of batches with a row to count, float64 [1] on device(), for
  /// cross_entropy's batch_count (Note [a batch that counts nothing, on the device]) to add to;
  /// read() then divides the loss by it instead of the host's `batches`.
  Tensor batch_count();
  /// Adds float64 [5] on device() ({correct, counted, the label check's 3}: a classifier's step
  /// written elsewhere, GraphStep's scratch) to the open slot's counts and check, one launch
  /// (queued); read() reports them as class_counts()' and target_check()'s. float64 [6] adds the
  /// step's batch count too, as batch_count()'s.
  void add_class_totals(const Tensor& counts_and_check);
  int64_t pending() const noexcept { return used_; }
  bool full() const noexcept { return used_ == capacity_; }
  /// The totals of every step opened since the last read, oldest first, and empties the slots:
  /// one copy to pinned host memory and one wait for it (none on the CPU).
  std::vector<StepTotals> read();

 private:
  // loss sum, gradient sum of squares, the scaler's record (4), top-1 counts (2), label check (3),
  // batches counted on the device
  static constexpr int64_t kFields = 12;
  static constexpr int64_t kRecord = 2;    // the record's first field
  static constexpr int64_t kCounts = 6;    // the counts' first field
  static constexpr int64_t kCheck = 8;     // the check's first field
  static constexpr int64_t kBatches = 11;  // the batch count
  Tensor field(int64_t slot, int64_t f) const { return slots_.narrow(slot * kFields + f, 1); }

  Device device_;
  int64_t capacity_;
  int64_t used_ = 0;
  std::vector<int64_t> batches_;   // per open slot: the loss's divisor
  std::vector<bool> has_norm_;     // per open slot: a sum of squares was added
  std::vector<bool> has_record_;   // per open slot: the scaler's record was handed out
  std::vector<bool> has_counts_;   // per open slot: the top-1 counts were handed out
  std::vector<bool> has_batches_;  // per open slot: the batch count was handed out
  Tensor slots_;                   // [capacity * kFields] float64 on device_, zero when unused
  Tensor widened_;                 // [1] float64 on device_: a float32 loss, widened
  Tensor host_;                    // [capacity * kFields] float64, pinned on a GPU
  std::optional<Event> copied_;    // recorded after the copy into host_
};

}  // namespace minitrain
