// A dataset from two .npy files: features X [N, in] and targets Y [N, out] or [N]. read_npy
// checks the files themselves; here how the two fit together, and that every value is finite
// (NumPy stores NaN happily; a NaN in training data only shows up later as a NaN loss).

#include <utility>

#include "core/error.h"
#include "core/finite.h"
#include "core/npy.h"
#include "data/readers.h"

namespace minitrain {
namespace {

void check_finite_data(const Tensor& t, const std::string& path, const char* what) {
  const int64_t bad = first_non_finite(t);
  if (bad < 0) return;
  const int64_t width = t.ndim() == 2 ? t.size(1) : 1;
  MT_THROW(ValueError, what, " file '", path, "' holds ", non_finite_name(t, bad), " at row ",
           bad / width, t.ndim() == 2 ? ", column " + std::to_string(bad % width) : std::string(),
           " (0-based, shape ", t.shape(),
           "); training data must be finite: drop or fill the row (e.g. np.nan_to_num)");
}

}  // namespace

TensorDataset load_npy_dataset(const std::string& features_path, const std::string& targets_path) {
  Tensor x = read_npy(features_path);
  Tensor y = read_npy(targets_path, Device::cpu(), NpyIntegers::AsFloat64);  // labels may be ints
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "features file '", features_path,
              "' holds an array of shape ", x.shape(),
              "; features must be [N, in] (reshape a 1-D array of N samples to [N, 1])");
  MT_CHECK_AS(ShapeError, y.ndim() == 1 || y.ndim() == 2, "targets file '", targets_path,
              "' holds an array of shape ", y.shape(), "; targets must be [N, out] or [N]");
  MT_CHECK_AS(ShapeError, x.size(0) == y.size(0),
              "features and targets have different row counts: '", features_path, "' is ",
              x.shape(), " (", x.size(0), " rows) but '", targets_path, "' is ", y.shape(), " (",
              y.size(0), " rows)");
  MT_CHECK_AS(IoError, x.size(0) > 0, "features file '", features_path, "' holds no rows (shape ",
              x.shape(), "); a dataset needs at least one sample");
  check_finite_data(x, features_path, "features");
  check_finite_data(y, targets_path, "targets");
  return TensorDataset(std::move(x), std::move(y));
}

}  // namespace minitrain
