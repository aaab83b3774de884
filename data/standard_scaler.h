#pragma once
// Standardised features, as scikit-learn's StandardScaler: x' = (x - mean) / scale per column,
// with the column's mean and population standard deviation (ddof = 0) over the rows it is fitted
// on: the training rows only, so that no held-out number leaks into training. A constant column
// gets scale 1 (sklearn's rule), so it becomes 0 instead of a division by zero.

#include <vector>

#include "core/tensor.h"

namespace minitrain {

struct StandardScaler {
  std::vector<float> mean;   ///< per feature
  std::vector<float> scale;  ///< per feature, > 0
  bool empty() const noexcept { return mean.empty(); }
};

/// Fits on x [N, F] (float32 or float64, on the CPU; N >= 1): two passes in float64 over the
/// values as float32 (the mean, then the squared deviations from it), rounded to float32 at the
/// end, which are the numbers stored with the weights. A column is constant where its variance
/// is within float64 rounding of 0 (sklearn's _is_constant_feature bound:
/// var <= n eps var + (n mean eps)^2), and gets scale 1. ShapeError for x not 2-D or N = 0.
StandardScaler fit_standard_scaler(const Tensor& x);

/// (x - mean) / scale per column, each value first rounded to float32, then one float32
/// subtraction and one float32 division (what `minitrain export` writes in C, bit for bit):
/// float32 [N, F] on the CPU. ShapeError where x is not [N, F] for the scaler's F.
Tensor standardize(const Tensor& x, const StandardScaler& scaler);

}  // namespace minitrain
