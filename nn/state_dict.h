#pragma once
// Weights in and out of a module by PyTorch state_dict names, and as .safetensors files that
// torch's load_state_dict accepts (and that a PyTorch-made file provides).

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"

namespace minitrain {

/// Copies of every parameter on the CPU, by name, in the module's order.
std::vector<std::pair<std::string, Tensor>> state_dict(Module& m);

/// Copies `tensors` into the module's parameters (any device, float32/float64 converted to the
/// parameter's dtype). Strict: a missing or unexpected name, or a shape that differs, throws
/// (ValueError / ShapeError) naming every such key, before anything is changed.
void load_state_dict(Module& m, const std::vector<std::pair<std::string, Tensor>>& tensors);

/// Atomic write (core/atomic_file.h); metadata goes into __metadata__ beside "format": "pt" and
/// "minitrain_version" (core/version.h: the version that wrote the file). `dtype` other than the
/// parameters' converts them on the way (bfloat16/float16: rounded to nearest even, dtype BF16 or
/// F16 in the header, as torch's safetensors writes a .half() or .bfloat16() state_dict).
void save_weights(const std::string& path, Module& m,
                  const std::map<std::string, std::string>& metadata = {},
                  std::optional<DType> dtype = std::nullopt);
void load_weights(const std::string& path, Module& m);

}  // namespace minitrain
