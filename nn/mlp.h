#pragma once
// Multi-layer perceptrons as the command line names them: "mlp:IN,H1,...,OUT" is a Sequential of
// Linear(IN,H1), act, Linear(H1,H2), act, ..., Linear(Hk,OUT) — no activation after the last.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/generator.h"
#include "kernels/activation.h"
#include "nn/sequential.h"

namespace minitrain {

/// "mlp:3,16,16,2" -> {3, 16, 16, 2}; throws ValueError naming the text (at least two sizes,
/// each a positive integer).
std::vector<int64_t> parse_mlp_spec(const std::string& spec);

/// Layers initialised in order from `gen` (weight then bias, layer by layer).
std::unique_ptr<Sequential> make_mlp(const std::vector<int64_t>& sizes, Activation activation,
                                     Generator& gen, Device device = Device::cpu(),
                                     DType dtype = DType::Float32);

}  // namespace minitrain
