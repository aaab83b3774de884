// Cross-entropy: entry points, the host-side check of the class indices (Note [cross_entropy's
// targets on the host] in cross_entropy.h), and the CPU loops: parallel_for over rows, each row
// a max pass, a sum-of-exponentials pass and a gradient pass; per-row losses in double summed in
// row order, so the result does not depend on the thread count.

#include "kernels/loss/cross_entropy.h"

#include <cmath>
#include <vector>

#include "core/buffer_slot.h"
#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace minitrain {

// ---- CPU reference ----

namespace {
// One row: its loss (0 if ignored), and with grad its gradient scaled by `scale`. The target's
// shifted logit is read before any gradient is stored, so grad may be x.
template <typename T>
double cross_entropy_row(const T* x, int64_t cols, const CrossEntropyArgs<T>& a, int64_t row,
                         T* grad, double scale) {
  const T target = a.classes[row];
  if (cross_entropy_ignored(target, a.ignore_index)) {
    if (grad != nullptr)
      for (int64_t j = 0; j < cols; ++j) grad[j] = T(0);
    return 0.0;
  }
  const int64_t y = static_cast<int64_t>(target);
  T m = x[0];
  for (int64_t j = 1; j < cols; ++j) m = x[j] > m ? x[j] : m;
  double sum_exp = 0, weighted_shifted = 0;
  for (int64_t j = 0; j < cols; ++j) {
    const T s = x[j] - m;
    sum_exp += double(actmath::exp(s));
    if (a.k.smoothing) weighted_shifted += (a.weights ? double(a.weights[j]) : 1.0) * double(s);
  }
  const double lse = std::log(sum_exp);
  const double w_y = a.weights ? double(a.weights[y]) : 1.0;
  const double loss = cross_entropy_row_loss(a.k, lse, double(x[y] - m), w_y, weighted_shifted);
  if (grad != nullptr)
    for (int64_t j = 0; j < cols; ++j)
      grad[j] = cross_entropy_grad<T>(a.k, x[j] - m, lse, w_y,
                                      a.weights ? double(a.weights[j]) : 1.0, j == y, scale);
  return loss;
}
}  // namespace

template <typename T>
void cross_entropy_rows_cpu(const T* logits, int64_t rows, int64_t cols,
                            const CrossEntropyArgs<T>& args, const CrossEntropyOutputs<T>& o) {
  parallel_for(rows, std::max<int64_t>(1, kElementwiseGrain / std::max<int64_t>(1, cols)),
               [&](int64_t begin, int64_t end) {
                 for (int64_t i = begin; i < end; ++i) {
                   const double scale =
                       (o.grad_out ? double(o.grad_out[o.per_row ? i : 0]) : 1.0) * o.inv_total;
                   const double loss =
                       cross_entropy_row(logits + i * cols, cols, args, i,
                                         o.grad ? o.grad + i * cols : nullptr, scale);
                   if (o.row_loss) o.row_loss[i] = loss;
                   if (o.row_out) o.row_out[i] = static_cast<T>(loss);
                 }
               });
}

template <typename T>
void cross_entropy_count_correct_cpu(double* counts, double* topk, const T* logits,
                                     const T* classes, int64_t rows, int64_t cols,
                                     int64_t ignore_index, int64_t k) {
  CrossEntropyRowCounts c;
  for (int64_t i = 0; i < rows; ++i)
    cross_entropy_count_row(c, logits, classes, i, cols, ignore_index, k, topk != nullptr);
  counts[0] += c.correct;
  counts[1] += c.counted;
  if (topk != nullptr) topk[0] += c.in_topk;
}

#define MT_INSTANTIATE_CROSS_ENTROPY_CPU(T)                                                       \
  template void cross_entropy_rows_cpu<T>(const T*, int64_t, int64_t, const CrossEntropyArgs<T>&, \
                                          const CrossEntropyOutputs<T>&);                         \
  template void cross_entropy_count_correct_cpu<T>(double*, double*, const T*, const T*, int64_t, \
                                                   int64_t, int64_t, int64_t);
MT_INSTANTIATE_CROSS_ENTROPY_CPU(float)
MT_INSTANTIATE_CROSS_ENTROPY_CPU(double)
#undef MT_INSTANTIATE_CROSS_ENTROPY_CPU

// ---- entry points ----

namespace {
// The checks and host-side numbers of one call: shapes, the setting's range, every class index,
// the weights' total over the classes and over the non-ignored rows.
struct CrossEntropyPlan {
  int64_t rows = 0, cols = 0;
  CrossEntropyCoefficients k{};
  double target_weight_total = 0;  // sum over non-ignored rows of w[y_i]
  bool weighted = false;
};

template <typename T>
std::vector<double> host_doubles(const Tensor& t) {
  const std::vector<T> v = t.to(Device::cpu()).to_vector<T>();
  return std::vector<double>(v.begin(), v.end());
}

// A target the host check refuses: the one message of both checks.
[[noreturn]] void throw_bad_target(const char* op, int64_t row, double v, int64_t cols,
                                   int64_t ignore_index) {
  MT_THROW(ValueError, op, ": row ", row, " has target ", v,
           ", which is not a class index: logits have C = ", cols,
           " classes, so a target must be a whole number in [0, ", cols, ") or ignore_index (",
           ignore_index, ")");
}

// A class weight the check refuses: the one message of both checks.
[[noreturn]] void throw_bad_weight(const char* op, int64_t c, double w) {
  MT_THROW(ValueError, op, ": class_weights[", c, "] must be >= 0 but is ", w);
}

// On the device, the targets are neither copied nor checked here (Note [cross_entropy's targets
// on the device]): the plan holds what the host knows without them.
CrossEntropyPlan plan_cross_entropy(const char* op, const Tensor& logits, const Tensor& classes,
                                    const CrossEntropySpec& spec, bool targets_on_device) {
  check_compatible(op, {{"logits", logits}, {"classes", classes}});
  MT_CHECK_AS(ShapeError, logits.ndim() == 2, op,
              ": logits must be [N, C] (a row of class scores "
              "per sample) but have shape ",
              logits.shape());
  CrossEntropyPlan plan;
  plan.rows = logits.size(0);
  plan.cols = logits.size(1);
  const bool classes_fit =
      (classes.ndim() == 1 && classes.size(0) == plan.rows) ||
      (classes.ndim() == 2 && classes.size(0) == plan.rows && classes.size(1) == 1);
  MT_CHECK_AS(ShapeError, classes_fit, op, ": classes ", classes.shape(),
              " must hold one class index per row of logits ", logits.shape(), ": shape [",
              plan.rows, "] or [", plan.rows, ", 1]");
  MT_CHECK_AS(ValueError, spec.label_smoothing >= 0 && spec.label_smoothing <= 1, op,
              ": label_smoothing must be in [0, 1] but is ", spec.label_smoothing);
  std::vector<double> weights;
  plan.weighted = spec.class_weights.defined();
  if (spec.class_weights.defined()) {
    check_compatible(op, {{"class_weights", spec.class_weights}, {"logits", logits}});
    MT_CHECK_AS(ShapeError,
                spec.class_weights.ndim() == 1 && spec.class_weights.numel() == plan.cols, op,
                ": class_weights ", spec.class_weights.shape(),
                " must have one weight per class"
                " of logits ",
                logits.shape(), " (", plan.cols, ")");
    // On the device the weights are checked and totalled there (no copy).
    if (!targets_on_device) {
      weights = dispatch_float(logits.dtype(), [&](auto zero) {
        return host_doubles<decltype(zero)>(spec.class_weights);
      });
      for (size_t c = 0; c < weights.size(); ++c)
        if (!(weights[c] >= 0)) throw_bad_weight(op, int64_t(c), weights[c]);
    }
  }
  if (targets_on_device) {
    MT_CHECK_AS(ShapeError,
                spec.target_check.dtype() == DType::Float64 && spec.target_check.numel() == 3, op,
                ": target_check must be float64 [3] but is ", spec.target_check.dtype(), " ",
                spec.target_check.shape());
  } else {
    const std::vector<double> targets = dispatch_float(
        logits.dtype(), [&](auto zero) { return host_doubles<decltype(zero)>(classes); });
    for (int64_t i = 0; i < plan.rows; ++i) {
      const double v = targets[size_t(i)];
      if (v == double(spec.ignore_index)) continue;  // cross_entropy_ignored's test
      if (!(v >= 0 && v < double(plan.cols) && v == std::floor(v)))
        throw_bad_target(op, i, v, plan.cols, spec.ignore_index);
      plan.target_weight_total += weights.empty() ? 1.0 : weights[size_t(v)];
    }
  }
  double weight_total = double(plan.cols);
  if (!weights.empty()) {
    weight_total = 0;
    for (double w : weights) weight_total += w;
  }
  const double eps = spec.label_smoothing;
  plan.k = {1.0 - eps, plan.cols > 0 ? eps / double(plan.cols) : 0.0, weight_total, eps > 0};
  return plan;
}

template <typename T>
CrossEntropyArgs<T> loop_args(const Tensor& classes, const CrossEntropySpec& spec,
                              const CrossEntropyPlan& plan, const double* weight_total = nullptr) {
  return {classes.data<T>(), spec.class_weights.defined() ? spec.class_weights.data<T>() : nullptr,
          spec.ignore_index, plan.k, weight_total};
}

void check_loss_out(const char* op, const char* name, const Tensor& out, const Tensor& logits,
                    Reduction reduction, int64_t rows) {
  check_not_batchmean(op, reduction);
  check_compatible(op, {{name, out}, {"logits", logits}});
  if (reduction == Reduction::None)
    MT_CHECK_AS(ShapeError, out.ndim() == 1 && out.size(0) == rows, op, ": with reduction 'none' ",
                name, " must be [", rows, "] (one per row) but has shape ", out.shape());
  else
    MT_CHECK_AS(ShapeError, out.ndim() == 0, op, ": with reduction '", reduction_name(reduction),
                "' ", name, " must be 0-d (shape []) but has shape ", out.shape());
}

// The one body of the three entry points: out (the loss) and/or grad (with grad_out, or 1).
void run_cross_entropy(const char* op, Tensor* out, Tensor* grad, const Tensor* grad_out,
                       const Tensor& logits, const Tensor& classes, const CrossEntropySpec& spec,
                       Reduction reduction) {
  const bool on_device = cross_entropy_checks_on_device(logits, spec);
  if (on_device)
    MT_CHECK_AS(DeviceError, spec.target_check.device() == logits.device(), op,
                ": target_check is on ", spec.target_check.device(), ", the logits on ",
                logits.device());
  // Note [a batch that counts nothing, on the device]: only where the targets are checked there.
  const bool count_batch = on_device && spec.batch_count.defined();
  MT_CHECK_AS(ValueError, !spec.batch_count.defined() || on_device, op,
              ": batch_count needs target_check and logits on a CUDA device (the logits are on ",
              logits.device(), ")");
  MT_CHECK_AS(ValueError, !spec.skip_flag.defined() || count_batch, op,
              ": skip_flag needs batch_count");
  if (count_batch) {
    MT_CHECK_AS(ShapeError,
                spec.batch_count.dtype() == DType::Float64 && spec.batch_count.numel() == 1 &&
                    spec.batch_count.device() == logits.device(),
                op, ": batch_count must be float64 [1] on ", logits.device(), " but is ",
                spec.batch_count.dtype(), " ", spec.batch_count.shape(), " on ",
                spec.batch_count.device());
    if (spec.skip_flag.defined())
      MT_CHECK_AS(ShapeError,
                  spec.skip_flag.dtype() == DType::Float32 && spec.skip_flag.numel() == 1 &&
                      spec.skip_flag.device() == logits.device(),
                  op, ": skip_flag must be float32 [1] on ", logits.device(), " but is ",
                  spec.skip_flag.dtype(), " ", spec.skip_flag.shape(), " on ",
                  spec.skip_flag.device());
  }
  const CrossEntropyPlan plan = plan_cross_entropy(op, logits, classes, spec, on_device);
  if (out != nullptr) check_loss_out(op, "out", *out, logits, reduction, plan.rows);
  if (grad_out != nullptr) check_loss_out(op, "grad_out", *grad_out, logits, reduction, plan.rows);
  if (grad != nullptr) {
    check_compatible(op, {{"grad_logits", *grad}, {"logits", logits}});
    check_same_shape(op, {{"grad_logits", *grad}, {"logits", logits}});
  }
  const bool per_row = reduction == Reduction::None;
  const bool mean = reduction == Reduction::Mean;
  // The mean's divisor, and the gradient's scale computed from the same number.
  const double divisor = mean ? plan.target_weight_total : 1.0;
  const double inv_total = 1.0 / divisor;
  // The loops' outputs, the mean/sum's per-row doubles at row_loss (on the loops' device).
  auto outputs = [&](auto zero, double* row_loss, const double* device_divisor,
                     const double* counted_divisor = nullptr) {
    using T = decltype(zero);
    return CrossEntropyOutputs<T>{row_loss,
                                  out != nullptr && per_row ? out->data<T>() : nullptr,
                                  grad != nullptr ? grad->data<T>() : nullptr,
                                  grad_out != nullptr ? grad_out->data<T>() : nullptr,
                                  per_row,
                                  inv_total,
                                  device_divisor,
                                  counted_divisor};
  };
  dispatch_op(
      op, logits.device(), logits.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        std::vector<double> row_loss;
        if (out != nullptr && !per_row) row_loss.resize(size_t(plan.rows));
        const auto o = outputs(zero, row_loss.empty() ? nullptr : row_loss.data(), nullptr);
        cross_entropy_rows_cpu<T>(logits.data<T>(), plan.rows, plan.cols,
                                  loop_args<T>(classes, spec, plan), o);
        if (out != nullptr && !per_row) {
          double sum = 0;
          for (double l : row_loss) sum += l;
          out->data<T>()[0] = static_cast<T>(sum / divisor);
        }
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        // Freed on return while the kernels may still run: safe, as the caching allocator hands
        // the block only to later work on this same stream (Note [streams and the caching
        // allocator]).
        Tensor row_loss;
        if (out != nullptr && !per_row)
          row_loss = spec.workspace != nullptr
                         ? spec.workspace->get({plan.rows}, DType::Float64, logits.device())
                         : Tensor::empty({plan.rows}, DType::Float64, logits.device());
        // With the targets checked on the device, the mean's divisor is formed there too (and
        // with weights their total, {divisor, weight total}).
        Tensor device_divisor;
        const T* weights = plan.weighted ? spec.class_weights.data<T>() : nullptr;
        if (on_device) {
          device_divisor = spec.workspace != nullptr
                               ? spec.workspace->get({2}, DType::Float64, logits.device())
                               : Tensor::empty({2}, DType::Float64, logits.device());
          cross_entropy_check_targets_cuda<T>(
              device_divisor.data<double>(), spec.target_check.data<double>(), classes.data<T>(),
              weights, plan.rows, plan.cols, spec.ignore_index, stream,
              count_batch ? spec.batch_count.data<double>() : nullptr,
              spec.skip_flag.defined() ? spec.skip_flag.data<float>() : nullptr);
        }
        const double* divisor_at = on_device && mean ? device_divisor.data<double>() : nullptr;
        const double* weight_total_at =
            on_device && plan.weighted ? device_divisor.data<double>() + 1 : nullptr;
        const auto o = outputs(zero, row_loss.defined() ? row_loss.data<double>() : nullptr,
                               divisor_at, count_batch ? device_divisor.data<double>() : nullptr);
        cross_entropy_rows_cuda<T>(logits.data<T>(), plan.rows, plan.cols,
                                   loop_args<T>(classes, spec, plan, weight_total_at), o, stream);
        if (row_loss.defined() && divisor_at != nullptr)
          cross_entropy_mean_rows_cuda<T>(out->data<T>(), row_loss.data<double>(), plan.rows,
                                          divisor_at, stream, count_batch);
        else if (row_loss.defined())
          cross_entropy_sum_rows_cuda<T>(out->data<T>(), row_loss.data<double>(), plan.rows,
                                         divisor, stream);
      });
}

Shape loss_shape(const Tensor& logits, Reduction reduction) {
  return reduction == Reduction::None ? Shape{logits.ndim() > 0 ? logits.size(0) : 0} : Shape{};
}
}  // namespace

bool cross_entropy_checks_on_device(const Tensor& logits, const CrossEntropySpec& spec) {
  return spec.target_check.defined() && logits.defined() && logits.device().is_cuda();
}

void throw_bad_cross_entropy_target(const char* op, const double* check, int64_t classes,
                                    int64_t ignore_index) {
  if (check[0] == 0) return;
  if (check[0] == 2) throw_bad_weight(op, static_cast<int64_t>(check[1]), check[2]);
  throw_bad_target(op, static_cast<int64_t>(check[1]), check[2], classes, ignore_index);
}

void cross_entropy_count_correct(Tensor& counts, const Tensor& logits, const Tensor& classes,
                                 int64_t ignore_index, int64_t k, Tensor* topk_counts) {
  const char* op = "cross_entropy_count_correct";
  check_compatible(op, {{"logits", logits}, {"classes", classes}});
  MT_CHECK_AS(ShapeError, logits.ndim() == 2 && classes.numel() == logits.size(0), op, ": logits ",
              logits.shape(), " and classes ", classes.shape(),
              " do not fit (expected [N, C] and N classes)");
  MT_CHECK_AS(ShapeError, counts.dtype() == DType::Float64 && counts.numel() == 2, op,
              ": counts must be float64 [2] but is ", counts.dtype(), " ", counts.shape());
  MT_CHECK_AS(DeviceError, counts.device() == logits.device(), op, ": counts are on ",
              counts.device(), ", the logits on ", logits.device());
  MT_CHECK_AS(ValueError, k >= 1, op, ": k must be >= 1, got ", k);
  if (topk_counts != nullptr) {
    MT_CHECK_AS(ShapeError, topk_counts->dtype() == DType::Float64 && topk_counts->numel() == 1, op,
                ": topk_counts must be float64 [1] but is ", topk_counts->dtype(), " ",
                topk_counts->shape());
    MT_CHECK_AS(DeviceError, topk_counts->device() == logits.device(), op, ": topk_counts are on ",
                topk_counts->device(), ", the logits on ", logits.device());
  }
  const int64_t rows = logits.size(0), cols = logits.size(1);
  if (rows == 0) return;
  double* topk = topk_counts != nullptr ? topk_counts->data<double>() : nullptr;
  dispatch_op(
      op, logits.device(), logits.dtype(),
      [&](auto zero) {
        using T = decltype(zero);
        cross_entropy_count_correct_cpu<T>(counts.data<double>(), topk, logits.data<T>(),
                                           classes.data<T>(), rows, cols, ignore_index, k);
      },
      [&](auto zero, auto stream) {
        using T = decltype(zero);
        cross_entropy_count_correct_cuda<T>(counts.data<double>(), topk, logits.data<T>(),
                                            classes.data<T>(), rows, cols, ignore_index, k, stream);
      });
}

void cross_entropy_forward(Tensor& out, const Tensor& logits, const Tensor& classes,
                           const CrossEntropySpec& spec, Reduction reduction) {
  run_cross_entropy("cross_entropy_forward", &out, nullptr, nullptr, logits, classes, spec,
                    reduction);
}

void cross_entropy_backward(Tensor& grad_logits, const Tensor& grad_out, const Tensor& logits,
                            const Tensor& classes, const CrossEntropySpec& spec,
                            Reduction reduction) {
  run_cross_entropy("cross_entropy_backward", nullptr, &grad_logits, &grad_out, logits, classes,
                    spec, reduction);
}

void cross_entropy_forward_backward(Tensor& out, Tensor& grad_logits, const Tensor& logits,
                                    const Tensor& classes, const CrossEntropySpec& spec,
                                    Reduction reduction) {
  run_cross_entropy("cross_entropy_forward_backward", &out, &grad_logits, nullptr, logits, classes,
                    spec, reduction);
}

Tensor cross_entropy_forward(const Tensor& logits, const Tensor& classes,
                             const CrossEntropySpec& spec, Reduction reduction) {
  check_compatible("cross_entropy_forward", {{"logits", logits}});
  Tensor out = Tensor::empty(loss_shape(logits, reduction), logits.dtype(), logits.device());
  cross_entropy_forward(out, logits, classes, spec, reduction);
  return out;
}

Tensor cross_entropy_backward(const Tensor& grad_out, const Tensor& logits, const Tensor& classes,
                              const CrossEntropySpec& spec, Reduction reduction) {
  check_compatible("cross_entropy_backward", {{"logits", logits}});
  Tensor grad = Tensor::empty(logits.shape(), logits.dtype(), logits.device());
  cross_entropy_backward(grad, grad_out, logits, classes, spec, reduction);
  return grad;
}

}  // namespace minitrain
