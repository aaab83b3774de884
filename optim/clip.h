#pragma once
// torch.nn.utils.clip_grad_norm_: scales every gradient by max_norm / (total_norm + 1e-6) when the
// global 2-norm over all of them exceeds max_norm.

#include "nn/parameter.h"

namespace minitrain {

/// Returns the total norm before clipping. ValueError for max_norm <= 0 or non-finite.
double clip_grad_norm_(const NamedParameters& params, double max_norm);

}  // namespace minitrain
