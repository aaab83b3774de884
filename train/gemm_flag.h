#pragma once
// The --gemm flag of the commands that run a model (train, predict): a registered GEMM backend
// (kernels/gemm/gemm_registry.h) for the run's device type, checked before any data is read.

#include <string>

#include "core/device.h"

namespace minitrain {

/// "auto" or a registered backend that runs on `device`'s type. ValueError "--gemm: ..." listing
/// the registered names for an unknown one, or the names for `device` for one of another device.
void check_gemm_flag(const std::string& name, Device device);

}  // namespace minitrain
