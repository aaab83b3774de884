// The built-in regression task: a fixed smooth function of uniform inputs plus Gaussian noise.
// Each output mixes every input through sines of different frequencies, so a linear model cannot
// fit it but a small MLP can, and the loss has a known floor (noise^2).

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.h"
#include "core/generator.h"
#include "core/parallel_for.h"
#include "data/readers.h"
#include "kernels/random.h"

namespace minitrain {

TensorDataset make_synthetic_regression(int64_t n, int64_t in_dim, int64_t out_dim, uint64_t seed,
                                        double noise) {
  MT_CHECK_AS(ValueError, n >= 1, "synthetic regression: need at least 1 sample, got n = ", n);
  MT_CHECK_AS(ValueError, in_dim >= 1 && out_dim >= 1,
              "synthetic regression: input and output sizes must be at least 1, got in = ", in_dim,
              ", out = ", out_dim);
  MT_CHECK_AS(ValueError, std::isfinite(noise) && noise >= 0,
              "synthetic regression: noise must be a finite standard deviation >= 0, got ", noise);

  // One generator, two draws in a fixed order: inputs, then noise.
  Generator gen(seed);
  Tensor x = Tensor::empty({n, in_dim});
  uniform_(x, -1.0, 1.0, gen);
  Tensor y = Tensor::empty({n, out_dim});
  if (noise > 0) {
    normal_(y, 0.0, noise, gen);
  } else {
    std::fill(y.data<float>(), y.data<float>() + y.numel(), 0.f);
  }

  const float* xs = x.data<float>();
  float* ys = y.data<float>();
  const double scale = 1.0 / std::sqrt(static_cast<double>(in_dim));
  // Rows are independent, so the result is the same whatever the thread count.
  parallel_for(n, /*grain=*/std::max<int64_t>(1, 4096 / (in_dim * out_dim)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const float* xr = xs + r * in_dim;
                   float* yr = ys + r * out_dim;
                   for (int64_t j = 0; j < out_dim; ++j) {
                     double s = 0;
                     for (int64_t i = 0; i < in_dim; ++i)
                       s += std::sin(static_cast<double>(i + j + 1) * xr[i]);
                     const double q = xr[j % in_dim];
                     yr[j] = static_cast<float>(s * scale + 0.1 * q * q + yr[j]);
                   }
                 }
               });
  return TensorDataset(std::move(x), std::move(y));
}

}  // namespace minitrain
