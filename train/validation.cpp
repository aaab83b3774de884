// Held-out evaluation: batches gathered straight from the data set (no DataLoader, no shuffling),
// sums in double, divided once at the end.

#include "train/validation.h"

#include <cmath>
#include <limits>

#include "core/error.h"
#include "kernels/cast.h"
#include "kernels/loss/cross_entropy.h"
#include "nn/cross_entropy_loss.h"
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

namespace {
// Validator::on_device_'s sums: the loss, {correct, counted}, top-k correct, the label check.
constexpr int64_t kLossSum = 0, kCounts = 1, kTopk = 3, kCheck = 4, kSums = 7;
}  // namespace

Validator::Rows Validator::batch_rows(int64_t begin, int64_t k) {
  const int64_t n = rows(), f = data_->feature_dim(), t = data_->target_dim();
  // On a GPU, every row once: gathered, then copied to the device for this and later evaluations.
  if (options_.device.is_cuda() && !x_resident_.defined() &&
      double(n) * double(f + t) * sizeof(float) <= double(options_.resident_bytes)) {
    Tensor x = Tensor::empty({n, f});
    y_host_ = Tensor::empty({n, t});
    data_->gather(rows_, x, y_host_);
    x_resident_ = x.to(options_.device);
  }
  if (x_resident_.defined()) return {x_resident_.narrow(begin, k), y_host_.narrow(begin, k)};
  const std::vector<int64_t> idx(rows_.begin() + begin, rows_.begin() + begin + k);
  Tensor x = Tensor::empty({k, f});
  Tensor y = Tensor::empty({k, t});
  data_->gather(idx, x, y);
  return {on_device(x_batch_, x, options_.device), y};
}

Tensor Validator::on_device(BufferSlot& slot, const Tensor& host, Device device) {
  if (!device.is_cuda()) return host.to(device);
  // Into a buffer kept across batches and evaluations (Note [buffers that live across steps]):
  // the copy waits, as Tensor::to's, and is queued on the stream the slot reuses buffers on.
  Tensor d = slot.get(host.shape(), host.dtype(), device);
  d.copy_(host);
  return d;
}

Tensor Validator::batch_targets(const Rows& rows, int64_t begin, Device device) {
  if (!x_resident_.defined()) return on_device(y_batch_, rows.y_host, device);
  if (!y_resident_.defined() || y_resident_.device() != device) y_resident_ = y_host_.to(device);
  return y_resident_.narrow(begin, rows.y_host.size(0));
}

void Validator::add_on_device(const Tensor& pred, const Tensor& target) {
  if (!on_device_ || on_device_->device() != pred.device())
    on_device_ = std::make_unique<DeviceSums>(pred.device(), kSums);
  // cross-entropy checks the labels on the device, for the read at the end (Note
  // [cross_entropy's targets on the device]).
  auto* ce = dynamic_cast<CrossEntropyLoss*>(loss_.get());
  if (ce != nullptr) ce->set_target_check(on_device_->view(kCheck, 3));
  const Tensor loss = loss_->forward(pred, target);
  if (ce != nullptr) ce->set_target_check(Tensor());
  on_device_->add(kLossSum, loss);
  if (loss_->target_kind() == TargetKind::ClassIndices) {
    Tensor counts = on_device_->view(kCounts, 2), topk = on_device_->view(kTopk, 1);
    cross_entropy_count_correct(counts, pred, target, options_.loss.ignore_index, options_.topk,
                                options_.topk > 1 ? &topk : nullptr);
  }
}

void Validator::evaluate_batches(Module& model, std::vector<double>& sums, bool& added_on_device,
                                 int64_t& classes) {
  const bool classifier = loss_->target_kind() == TargetKind::ClassIndices;
  const auto n = static_cast<int64_t>(rows_.size());
  for (int64_t begin = 0; begin < n; begin += options_.batch_size) {
    // A stop request ends the evaluation between batches, not after every held-out row (issue 30).
    if (options_.stop_requested != nullptr && options_.stop_requested->load() != 0) {
      sums[6] = 1;
      break;
    }
    const int64_t k = std::min(options_.batch_size, n - begin);
    const Rows r = batch_rows(begin, k);
    const Tensor out = model.forward(r.x);
    // A 16-bit model's prediction (mixed precision) is scored in float32, as in training.
    Tensor pred = out;
    if (is_half(out.dtype())) {
      pred = widened_pred_.get(out.shape(), DType::Float32, out.device());
      cast(pred, out);
    }
    const Tensor target = batch_targets(r, begin, pred.device());
    if (pred.device().is_cuda()) {  // added on the device, read once below (issue 35)
      add_on_device(pred, target);
      added_on_device = true;
      if (classifier && pred.ndim() == 2) classes = pred.size(1);
    } else {
      sums[0] += loss_->forward(pred, target).item();
      if (classifier) {
        const ClassCounts c =
            count_correct(pred, r.y_host, options_.topk, options_.loss.ignore_index);
        sums[3] += c.correct;
        sums[4] += c.topk_correct;
        sums[5] += c.counted;
      }
    }
    sums[1] += mean_divisor(r.y_host, options_.loss, loss_->target_kind());
    sums[2] += static_cast<double>(k);
  }
}

ValMetrics Validator::evaluate(Module& model) {
  const bool classifier = loss_->target_kind() == TargetKind::ClassIndices;
  // loss sum, mean divisor, rows, correct, top-k correct, counted, ranks stopped by a signal
  std::vector<double> sums(7, 0.0);
  bool added_on_device = false;
  int64_t classes = 0;  // the logits' columns, to name a bad label
  model.eval();
  try {
    evaluate_batches(model, sums, added_on_device, classes);
  } catch (...) {
    on_device_.reset();  // partial sums: the next evaluation starts from zeros
    loss_->release_inputs();
    throw;
  }
  model.train();
  // The loss kept the last batch's prediction, a buffer of the model's last layer: let go, so
  // that the next evaluation (or step) rewrites it instead of allocating another.
  loss_->release_inputs();
  if (added_on_device) {  // the one read of the evaluation: one copy, one wait
    const std::vector<double> d = on_device_->read();
    throw_bad_cross_entropy_target("cross_entropy_forward", d.data() + kCheck, classes,
                                   options_.loss.ignore_index);
    sums[0] = d[kLossSum];  // each batch's loss widened and added in batch order: the host's bits
    sums[3] = d[kCounts];
    sums[4] = d[kTopk];
    sums[5] = d[kCounts + 1];
  }
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
