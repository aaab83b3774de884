#pragma once
// Inputs for the training benchmarks: fixed pseudo-random values (the timings do not depend on
// them) and the optimizer settings the PyTorch comparison uses too.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/make_optimizer.h"

namespace minitrain::bench {

/// [rows, cols] of values in [-1, 1) from a fixed LCG.
inline Tensor filled(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  uint32_t x = seed;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = static_cast<float>(x >> 8) / float(1 << 24) * 2.f - 1.f;
  }
  return Tensor::from_vector(v, Shape{rows, cols});
}

/// SGD with momentum 0.9 (one state buffer), Adam with torch's defaults (two).
inline OptimizerConfig optimizer_config(const std::string& name) {
  OptimizerConfig c;
  c.name = name;
  if (name == "sgd") {
    c.lr = 0.01;
    c.momentum = 0.9;
  } else {
    c.lr = 1e-3;
  }
  return c;
}

}  // namespace minitrain::bench
