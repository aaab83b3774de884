#pragma once
// Choosing the GEMM backend of a whole model by name: what `minitrain train --gemm NAME` does.
// Every Linear in the model, at any depth of Sequential nesting, gets the backend; layers
// without a GEMM (activations) are left alone.

#include <string>

#include "nn/module.h"

namespace minitrain {

/// Sets `name` (a registry name, kernels/gemm/gemm_registry.h, or "auto") on every Linear of
/// `model`. ValueError listing the registered names for an unknown one, before any layer is
/// changed. Returns how many Linear layers were set.
int set_gemm_backend(Module& model, const std::string& name);

}  // namespace minitrain
