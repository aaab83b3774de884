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

// ---- implementations ----
/// found (a float 0/1) is raised, never lowered.
void unscale_multi_cpu(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                       float inv_scale, float* found);
void unscale_multi_cuda(const std::vector<float*>& ptrs, const std::vector<int64_t>& sizes,
                        float inv_scale, float* found, CUstream_st* stream);

}  // namespace minitrain
