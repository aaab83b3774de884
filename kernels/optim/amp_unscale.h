#pragma once
// The gradient check of dynamic loss scaling (torch's _amp_foreach_non_finite_check_and_unscale_):
// every gradient multiplied by 1/scale and, in the same pass, whether any element is inf or NaN.
// One pass over a list of tensors (multi-tensor apply on the GPU, kernels/multi_tensor_apply.h),
// so a model's step costs one launch and one 4-byte read back, not one per tensor.

#include <cstdint>
#include <vector>

#include "core/tensor.h"

struct CUstream_st;

namespace minitrain {

/// grads[k] *= inv_scale for every k (float32 tensors on one device), and true when any element
/// was not finite. Every element is multiplied even when one is not finite, as torch does (the
/// step is then skipped, and the gradients are zeroed before the next). Waits for the device.
bool unscale_and_check_finite(std::vector<Tensor>& grads, double inv_scale);

// ---- the scaler kept on the device (issue 35: no read of the inf flag inside a step) ----
// `state` is float32 [kAmpStateSize] (kernels/optim/amp_math.h: scale, growth tracker) and
// `found_inf` float32 [1], both on the gradients' device; every call is queued, none waits.

/// found_inf = 0, then grads[k] *= 1/scale (the scale read from `state`) and found_inf = 1 when
/// any element was not finite: unscale_and_check_finite's pass, without the read.
void unscale_on_device(std::vector<Tensor>& grads, const Tensor& state, Tensor& found_inf);
/// torch's _amp_update_scale_ (amp_update_scale_one) on `state`, after the optimizer step. With
/// `record` (float64, >= kAmpRecordSize elements on the device) it also stores the scale used,
/// the flag and the state after, for the host to read with the step's loss. With
/// `batch_count` (float64 [1] on the device) holding 0, a step that counted nothing: the state
/// is left as it is and found_inf is set to 1, for the optimizer to skip (amp_update_scale_one).
void amp_update_scale(Tensor& state, const Tensor& found_inf, double growth_factor,
                      double backoff_factor, int64_t growth_interval, Tensor* record = nullptr,
                      const Tensor* batch_count = nullptr);
/// grad *= float(scale / divisor), the scale read from `state`: the loss gradient's scaling,
/// as scale(grad, grad, scale / divisor) with the host's scale.
void scale_by_loss_scale(Tensor& grad, const Tensor& state, double divisor);

// ---- implementations ----
/// found (a float 0/1) is raised, never lowered. With `scale_on_device` (not null) the factor is
/// amp_inv_scale(*scale_on_device) and `inv_scale` is ignored.
void unscale_multi_cpu(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                       float inv_scale, float* found, const float* scale_on_device = nullptr);
void unscale_multi_cuda(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                        float inv_scale, float* found, CUstream_st* stream,
                        const float* scale_on_device = nullptr);
void amp_update_scale_cuda(float* state, const float* found_inf, double growth_factor,
                           double backoff_factor, int64_t growth_interval, double* record,
                           CUstream_st* stream, const double* batches = nullptr,
                           float* raise = nullptr);
void scale_by_loss_scale_cuda(float* grad, int64_t n, const float* state, double divisor,
                              CUstream_st* stream);

}  // namespace minitrain
