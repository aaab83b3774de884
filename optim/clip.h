#pragma once
// torch.nn.utils.clip_grad_norm_ (norm_type 2): with total_norm the 2-norm over all gradients,
// multiplies every gradient by clip_coef = max_norm / (total_norm + 1e-6) clamped to at most 1,
// i.e. scales them once total_norm exceeds max_norm (from max_norm - 1e-6 on, as torch) and
// leaves them bit-for-bit alone otherwise. Gradients that are undefined are skipped. The norm
// is accumulated in float64 on each gradient's device and read back once per device.

#include "nn/parameter.h"

namespace minitrain {

/// Returns the total norm before clipping (NaN / inf when a gradient is not finite; the gradients
/// then become NaN, as in torch with error_if_nonfinite=False). ValueError for max_norm <= 0 or
/// non-finite.
double clip_grad_norm_(const NamedParameters& params, double max_norm);

}  // namespace minitrain
