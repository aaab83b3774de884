#pragma once
// What the loss kernels' tests share: every reduction, and central finite differences of a loss.

#include <functional>
#include <vector>

#include "core/tensor.h"
#include "kernels/loss/reduction.h"
#include "tests/support/test_util.h"

namespace minitrain::testing {

inline constexpr Reduction kAllReductions[] = {Reduction::Mean, Reduction::Sum, Reduction::None};

/// The number a loss's backward differentiates with grad_out g: the loss itself for mean/sum
/// (0-d, g = 1), sum_i g[i] loss[i] for none.
inline double loss_total(const Tensor& loss, const std::vector<double>& g) {
  if (loss.ndim() == 0) return loss.item();
  const std::vector<double> l = host_values(loss);
  double s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += g[i] * l[i];
  return s;
}

/// (f(x + h e_i) - f(x - h e_i)) / 2h for every i.
inline std::vector<double> central_differences(
    const std::function<double(const std::vector<double>&)>& f, const std::vector<double>& x,
    double h) {
  std::vector<double> d(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus(x), minus(x);
    plus[i] += h;
    minus[i] -= h;
    d[i] = (f(plus) - f(minus)) / (2 * h);
  }
  return d;
}

}  // namespace minitrain::testing
