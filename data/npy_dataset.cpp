// A dataset from two .npy files: features X [N, in] and targets Y [N, out] or [N]. read_npy
// checks the files themselves; here only how the two fit together.

#include <utility>

#include "core/error.h"
#include "core/npy.h"
#include "data/readers.h"

namespace minitrain {

TensorDataset load_npy_dataset(const std::string& features_path, const std::string& targets_path) {
  Tensor x = read_npy(features_path);
  Tensor y = read_npy(targets_path);
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "features file '", features_path, "' holds an array of shape ",
              x.shape(), "; features must be [N, in] (reshape a 1-D array of N samples to [N, 1])");
  MT_CHECK_AS(ShapeError, y.ndim() == 1 || y.ndim() == 2, "targets file '", targets_path,
              "' holds an array of shape ", y.shape(), "; targets must be [N, out] or [N]");
  MT_CHECK_AS(ShapeError, x.size(0) == y.size(0), "features and targets have different row counts: '",
              features_path, "' is ", x.shape(), " (", x.size(0), " rows) but '", targets_path, "' is ",
              y.shape(), " (", y.size(0), " rows)");
  MT_CHECK_AS(IoError, x.size(0) > 0, "features file '", features_path, "' holds no rows (shape ",
              x.shape(), "); a dataset needs at least one sample");
  return TensorDataset(std::move(x), std::move(y));
}

}  // namespace minitrain
