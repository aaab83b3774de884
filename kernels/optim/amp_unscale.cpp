// Loss-scale unscaling: the entry point and the CPU loop.

#include "kernels/optim/amp_unscale.h"

#include <atomic>

#include "core/parallel_for.h"
#include "core/stream.h"
#include "kernels/optim/amp_math.h"
#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/fill.h"

namespace minitrain {

void unscale_multi_cpu(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                       float inv_scale, float* found, const float* scale_on_device) {
  if (scale_on_device != nullptr) inv_scale = amp_inv_scale(*scale_on_device);
  std::atomic<bool> any{false};
  for (std::size_t k = 0; k < ptrs.size(); ++k) {
    float* g = ptrs[k];
    parallel_for(sizes[k], kElementwiseGrain, [&](int64_t begin, int64_t end) {
      bool bad = false;
      for (int64_t i = begin; i < end; ++i) bad |= unscale_element(g[i], inv_scale);
      if (bad) any.store(true, std::memory_order_relaxed);
    });
  }
  if (any.load()) *found = 1.0f;
}

namespace {

// The raw pointers of float32 gradients on one device; errors name the index.
void gradient_table(const char* op, const std::vector<Tensor>& grads, std::vector<float*>& ptrs,
                    std::vector<int64_t>& sizes) {
  const Device device = grads.front().device();
  for (std::size_t k = 0; k < grads.size(); ++k) {
    const Tensor& g = grads[k];
    MT_CHECK_AS(DTypeError, g.defined() && g.dtype() == DType::Float32, op, ": gradient ", k,
                " is ", g.defined() ? dtype_name(g.dtype()) : "undefined", ", not float32");
    MT_CHECK_AS(DeviceError, g.device() == device, op, ": gradient ", k, " is on ", g.device(),
                " but gradient 0 is on ", device);
    ptrs.push_back(g.data<float>());
    sizes.push_back(g.numel());
  }
}

void check_scaler_tensors(const char* op, const Device& device, const Tensor& state,
                          const Tensor& found_inf) {
  MT_CHECK_AS(
      ValueError,
      state.defined() && state.dtype() == DType::Float32 && state.numel() >= kAmpStateSize &&
          found_inf.defined() && found_inf.dtype() == DType::Float32 && found_inf.numel() == 1,
      op, ": the scaler state must be float32 [", kAmpStateSize, "] and the inf flag float32 [1]");
  MT_CHECK_AS(DeviceError, state.device() == device && found_inf.device() == device, op,
              ": the scaler state is on ", state.device(), " and the inf flag on ",
              found_inf.device(), ", not on ", device);
}

}  // namespace

void unscale_on_device(std::vector<Tensor>& grads, const Tensor& state, Tensor& found_inf) {
  const char* op = "unscale_on_device";
  const Device device = found_inf.device();
  check_scaler_tensors(op, device, state, found_inf);
  zero_(found_inf);
  if (grads.empty()) return;
  std::vector<float*> ptrs;
  std::vector<int64_t> sizes;
  gradient_table(op, grads, ptrs, sizes);
  MT_CHECK_AS(DeviceError, grads.front().device() == device, op, ": the gradients are on ",
              grads.front().device(), ", the scaler on ", device);
  const float* scale = state.data<float>();
  float* found = found_inf.data<float>();
  on_device(
      op, device, [&] { unscale_multi_cpu(ptrs, sizes, 1.0f, found, scale); },
      [&](auto stream) { unscale_multi_cuda(ptrs, sizes, 1.0f, found, stream, scale); });
}

void amp_update_scale(Tensor& state, const Tensor& found_inf, double growth_factor,
                      double backoff_factor, int64_t growth_interval, Tensor* record,
                      const Tensor* batch_count) {
  const char* op = "amp_update_scale";
  const Device device = state.device();
  check_scaler_tensors(op, device, state, found_inf);
  if (record != nullptr)
    MT_CHECK_AS(ValueError,
                record->dtype() == DType::Float64 && record->numel() >= kAmpRecordSize &&
                    record->device() == device,
                op, ": the record must be float64 [", kAmpRecordSize, "] on ", device);
  if (batch_count != nullptr)
    MT_CHECK_AS(ValueError,
                batch_count->dtype() == DType::Float64 && batch_count->numel() == 1 &&
                    batch_count->device() == device,
                op, ": the batch count must be float64 [1] on ", device, ", got ",
                batch_count->dtype(), " ", batch_count->shape(), " on ", batch_count->device());
  float* s = state.data<float>();
  float* found = found_inf.data<float>();  // raised when the step counted nothing
  double* r = record != nullptr ? record->data<double>() : nullptr;
  const double* batches = batch_count != nullptr ? batch_count->data<double>() : nullptr;
  float* raise = batches != nullptr ? found : nullptr;
  on_device(
      op, device,
      [&] {
        amp_update_scale_one(s, found, growth_factor, backoff_factor, growth_interval, r, batches,
                             raise);
      },
      [&](auto stream) {
        amp_update_scale_cuda(s, found, growth_factor, backoff_factor, growth_interval, r, stream,
                              batches, raise);
      });
}

void scale_by_loss_scale(Tensor& grad, const Tensor& state, double divisor) {
  const char* op = "scale_by_loss_scale";
  MT_CHECK_AS(DTypeError, grad.dtype() == DType::Float32, op, ": the gradient is ", grad.dtype(),
              ", not float32");
  MT_CHECK_AS(DeviceError, state.device() == grad.device(), op, ": the gradient is on ",
              grad.device(), ", the scaler state on ", state.device());
  float* g = grad.data<float>();
  const float* s = state.data<float>();
  const int64_t n = grad.numel();
  on_device(
      op, grad.device(),
      [&] {
        const float alpha = static_cast<float>(static_cast<double>(s[0]) / divisor);
        parallel_for(n, kElementwiseGrain, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) g[i] = alpha * g[i];
        });
      },
      [&](auto stream) { scale_by_loss_scale_cuda(g, n, s, divisor, stream); });
}

bool unscale_and_check_finite(std::vector<Tensor>& grads, double inv_scale) {
  if (grads.empty()) return false;
  const Device device = grads.front().device();
  std::vector<float*> ptrs;
  std::vector<int64_t> sizes;
  gradient_table("unscale_and_check_finite", grads, ptrs, sizes);
  const float inv = static_cast<float>(inv_scale);
  Tensor found = Tensor::zeros(Shape{1}, DType::Float32, device);
  on_device(
      "unscale_and_check_finite", device,
      [&] { unscale_multi_cpu(ptrs, sizes, inv, found.data<float>()); },
      [&](auto stream) { unscale_multi_cuda(ptrs, sizes, inv, found.data<float>(), stream); });
  return found.item() != 0.0;
}

}  // namespace minitrain
