// Device-side running totals of the training loop (issue 35): the step queues its additions and
// goes on; the host reads the waiting steps' slots together, through pinned memory and an event.

#include "train/device_totals.h"

#include <cmath>

#include "core/error.h"
#include "kernels/cast.h"
#include "kernels/elementwise.h"
#include "kernels/fill.h"

namespace minitrain {

DeviceSums::DeviceSums(Device device, int64_t n) : device_(device) {
  MT_CHECK_AS(ValueError, n >= 1, "DeviceSums: want >= 1 sums, got ", n);
  sums_ = Tensor::zeros({n}, DType::Float64, device);
  widened_ = Tensor::zeros({1}, DType::Float64, device);
  host_ = device.is_cuda() ? Tensor::empty_pinned({n}, DType::Float64)
                           : Tensor::zeros({n}, DType::Float64);
  if (device.is_cuda()) copied_.emplace(Event::create(device));
}

Tensor DeviceSums::view(int64_t first, int64_t n) const {
  MT_CHECK_AS(ValueError, first >= 0 && n >= 1 && first + n <= size(), "DeviceSums::view: sums [",
              first, ", ", first + n, ") of ", size());
  return sums_.narrow(first, n);
}

void DeviceSums::add(int64_t i, const Tensor& value) {
  MT_CHECK_AS(ShapeError, value.numel() == 1, "DeviceSums::add: the value ", value.shape(),
              " is not one value");
  MT_CHECK_AS(DeviceError, value.device() == device_, "DeviceSums::add: the value is on ",
              value.device(), ", the sums on ", device_);
  Tensor sum = view(i, 1);
  const Tensor one = value.reshape({1});
  if (one.dtype() == DType::Float64) {
    minitrain::add(sum, sum, one);
  } else {
    cast(widened_, one);  // exact: float32 -> float64, as item() widens it
    minitrain::add(sum, sum, widened_);
  }
}

std::vector<double> DeviceSums::read() {
  const std::size_t bytes = static_cast<std::size_t>(size()) * sizeof(double);
  if (copied_) {
    const Stream& stream = current_stream(device_);
    copy_bytes_async(host_.raw_data(), Device::cpu(), sums_.raw_data(), device_, bytes, stream);
    copied_->record(stream);
    copied_->synchronize();  // the one wait of a read
  } else {
    copy_bytes(host_.raw_data(), Device::cpu(), sums_.raw_data(), device_, bytes);
  }
  const double* v = host_.data<double>();
  std::vector<double> out(v, v + size());
  zero_(sums_);  // queued after the copy: the next additions start from zeros
  return out;
}

DeviceTotals::DeviceTotals(Device device, int64_t capacity) : device_(device), capacity_(capacity) {
  MT_CHECK_AS(ValueError, capacity >= 1, "DeviceTotals: capacity must be >= 1, got ", capacity);
  slots_ = Tensor::zeros({capacity * kFields}, DType::Float64, device);
  widened_ = Tensor::zeros({1}, DType::Float64, device);
  host_ = device.is_cuda() ? Tensor::empty_pinned({capacity * kFields}, DType::Float64)
                           : Tensor::zeros({capacity * kFields}, DType::Float64);
  if (device.is_cuda()) copied_.emplace(Event::create(device));
}

void DeviceTotals::begin_step(int64_t batches) {
  MT_CHECK(used_ < capacity_, "DeviceTotals: all ", capacity_,
           " slots wait to be read; read() before the next step");
  MT_CHECK_AS(ValueError, batches >= 1, "DeviceTotals: a step has >= 1 batches, got ", batches);
  batches_.push_back(batches);
  has_norm_.push_back(false);
  has_record_.push_back(false);
  has_counts_.push_back(false);
  has_batches_.push_back(false);
  ++used_;
}

void DeviceTotals::set_batches(int64_t batches) {
  MT_CHECK(used_ > 0, "DeviceTotals::set_batches: no step is open (begin_step first)");
  MT_CHECK_AS(ValueError, batches >= 0, "DeviceTotals::set_batches: batches must be >= 0, got ",
              batches);
  batches_.back() = batches;
}

void DeviceTotals::add_loss(const Tensor& loss) {
  MT_CHECK(used_ > 0, "DeviceTotals::add_loss: no step is open (begin_step first)");
  MT_CHECK_AS(ShapeError, loss.numel() == 1, "DeviceTotals::add_loss: the loss ", loss.shape(),
              " is not one value");
  MT_CHECK_AS(DeviceError, loss.device() == device_, "DeviceTotals::add_loss: the loss is on ",
              loss.device(), ", the totals on ", device_);
  Tensor sum = field(used_ - 1, 0);
  const Tensor one = loss.reshape({1});
  if (one.dtype() == DType::Float64) {
    add(sum, sum, one);
  } else {
    cast(widened_, one);  // exact: float32 -> float64, as loss.item() widens it
    add(sum, sum, widened_);
  }
}

void DeviceTotals::add_grad_sum_sq(const Tensor& sum_sq) {
  MT_CHECK(used_ > 0, "DeviceTotals::add_grad_sum_sq: no step is open (begin_step first)");
  MT_CHECK_AS(DTypeError, sum_sq.dtype() == DType::Float64 && sum_sq.numel() == 1,
              "DeviceTotals::add_grad_sum_sq: want one float64 value, got ", sum_sq.dtype(), " ",
              sum_sq.shape());
  MT_CHECK_AS(DeviceError, sum_sq.device() == device_, "DeviceTotals::add_grad_sum_sq: it is on ",
              sum_sq.device(), ", the totals on ", device_);
  Tensor total = field(used_ - 1, 1);
  add(total, total, sum_sq.reshape({1}));
  has_norm_[static_cast<std::size_t>(used_ - 1)] = true;
}

Tensor DeviceTotals::scaler_record() {
  MT_CHECK(used_ > 0, "DeviceTotals::scaler_record: no step is open (begin_step first)");
  has_record_[static_cast<std::size_t>(used_ - 1)] = true;
  return slots_.narrow((used_ - 1) * kFields + kRecord, kFields - kRecord);
}

Tensor DeviceTotals::class_counts() {
  MT_CHECK(used_ > 0, "DeviceTotals::class_counts: no step is open (begin_step first)");
  has_counts_[static_cast<std::size_t>(used_ - 1)] = true;
  return slots_.narrow((used_ - 1) * kFields + kCounts, 2);
}

Tensor DeviceTotals::target_check() {
  MT_CHECK(used_ > 0, "DeviceTotals::target_check: no step is open (begin_step first)");
  return slots_.narrow((used_ - 1) * kFields + kCheck, 3);
}

Tensor DeviceTotals::batch_count() {
  MT_CHECK(used_ > 0, "DeviceTotals::batch_count: no step is open (begin_step first)");
  has_batches_[static_cast<std::size_t>(used_ - 1)] = true;
  return slots_.narrow((used_ - 1) * kFields + kBatches, 1);
}

void DeviceTotals::add_class_totals(const Tensor& counts_and_check) {
  MT_CHECK(used_ > 0, "DeviceTotals::add_class_totals: no step is open (begin_step first)");
  const int64_t n = counts_and_check.numel();
  MT_CHECK_AS(DTypeError, counts_and_check.dtype() == DType::Float64 && (n == 5 || n == 6),
              "DeviceTotals::add_class_totals: want float64 [5] or [6], got ",
              counts_and_check.dtype(), " ", counts_and_check.shape());
  MT_CHECK_AS(DeviceError, counts_and_check.device() == device_,
              "DeviceTotals::add_class_totals: it is on ", counts_and_check.device(),
              ", the totals on ", device_);
  // kCounts (2) and kCheck (3) are adjacent: one add. The slot's fields are 0 until then, and a
  // check's {1, row, label} added to zeros is itself.
  static_assert(kCheck == kCounts + 2 && kBatches == kCheck + 3,
                "the counts, the check and the batch count must be adjacent");
  Tensor fields = slots_.narrow((used_ - 1) * kFields + kCounts, n);
  add(fields, fields, counts_and_check.reshape({n}));
  has_counts_[static_cast<std::size_t>(used_ - 1)] = true;
  if (n == 6) has_batches_[static_cast<std::size_t>(used_ - 1)] = true;
}

std::vector<StepTotals> DeviceTotals::read() {
  std::vector<StepTotals> out;
  if (used_ == 0) return out;
  const int64_t n = used_ * kFields;
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(double);
  if (copied_) {
    const Stream& stream = current_stream(device_);
    copy_bytes_async(host_.raw_data(), Device::cpu(), slots_.raw_data(), device_, bytes, stream);
    copied_->record(stream);
    copied_->synchronize();  // the one wait of a read
  } else {
    copy_bytes(host_.raw_data(), Device::cpu(), slots_.raw_data(), device_, bytes);
  }
  const double* v = host_.data<double>();
  for (int64_t i = 0; i < used_; ++i) {
    StepTotals t;
    t.loss_sum = v[i * kFields];
    t.loss = t.loss_sum / static_cast<double>(batches_[static_cast<std::size_t>(i)]);
    // As PendingGradNorm::read: sqrt(0.0 + sum of squares).
    if (has_norm_[static_cast<std::size_t>(i)]) t.grad_norm = std::sqrt(v[i * kFields + 1]);
    if (has_record_[static_cast<std::size_t>(i)]) {
      const double* r = v + i * kFields + kRecord;
      t.scaled = true;
      t.loss_scale = r[0];
      t.skipped = r[1] != 0.0;
      t.scale_after = r[2];
    }
    if (has_counts_[static_cast<std::size_t>(i)]) {
      t.counted_rows = true;
      t.correct = v[i * kFields + kCounts];
      t.counted = v[i * kFields + kCounts + 1];
    }
    for (int64_t f = 0; f < 3; ++f) t.target_check[f] = v[i * kFields + kCheck + f];
    if (has_batches_[static_cast<std::size_t>(i)]) {
      // The host's `sum / batches` with the device's count: 0/0 (NaN) when nothing counted.
      t.batches_on_device = true;
      t.counted_batches = v[i * kFields + kBatches];
      t.loss = t.loss_sum / t.counted_batches;
    }
    out.push_back(t);
  }
  Tensor used = slots_.narrow(0, n);
  zero_(used);  // queued after the copy: the next steps add into zeros
  used_ = 0;
  batches_.clear();
  has_norm_.clear();
  has_record_.clear();
  has_counts_.clear();
  has_batches_.clear();
  return out;
}

}  // namespace minitrain
