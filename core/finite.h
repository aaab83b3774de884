#pragma once
// Finding the first NaN or infinity in loaded data, so that a bad file is named with the place
// of its bad value when it is read, instead of showing up steps later as a diverged loss.

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace minitrain {

/// The flat (row-major) index of the first element of `t` that is NaN or +-inf, or -1 when every
/// element is finite. `t` must be a CPU float32 or float64 tensor.
int64_t first_non_finite(const Tensor& t);

/// "[3, 1]": the coordinates of flat index `index` in `shape`, as NumPy's np.unravel_index.
std::string unravel_index(int64_t index, const Shape& shape);

/// "nan", "inf" or "-inf": how element `index` of `t` prints.
std::string non_finite_name(const Tensor& t, int64_t index);

}  // namespace minitrain
