// TensorDataset: two float32 host tensors and a row gather. Gathering is memory-bound (one read
// and one write per element); consecutive indices (an unshuffled epoch) become one memcpy.

#include "data/dataset.h"

#include <cstring>

#include "core/error.h"
#include "kernels/cast.h"

namespace minitrain {

namespace {

// The tensor as float32 on the CPU: itself when it already is, else a converted copy.
Tensor host_float32(const Tensor& t) {
  Tensor host = t.to(Device::cpu());
  return host.dtype() == DType::Float32 ? host : cast(host, DType::Float32);
}

// Copies rows `indices` of src [N, d] into dst [k, d], merging runs of consecutive indices.
void gather_rows(const Tensor& src, const std::vector<int64_t>& indices, Tensor& dst) {
  const int64_t d = src.size(1);
  const std::size_t row_bytes = static_cast<std::size_t>(d) * sizeof(float);
  const float* s = src.data<float>();
  float* o = dst.data<float>();
  const int64_t k = static_cast<int64_t>(indices.size());
  for (int64_t i = 0; i < k;) {
    int64_t run = 1;
    while (i + run < k && indices[i + run] == indices[i] + run) ++run;
    std::memcpy(o + i * d, s + indices[i] * d, row_bytes * static_cast<std::size_t>(run));
    i += run;
  }
}

void check_batch_tensor(const Tensor& t, const char* name, int64_t k, int64_t d) {
  MT_CHECK_AS(ValueError, t.defined(), "Dataset::gather: ", name, " is an undefined tensor");
  MT_CHECK_AS(DeviceError, t.device().is_cpu(), "Dataset::gather: ", name, " is on ", t.device(),
              "; gather into a CPU tensor and copy it to the device");
  MT_CHECK_AS(DTypeError, t.dtype() == DType::Float32, "Dataset::gather: ", name, " holds ",
              t.dtype(), ", not float32");
  MT_CHECK_AS(ShapeError, t.shape() == Shape({k, d}), "Dataset::gather: ", name, " has shape ",
              t.shape(), " but ", k, " rows of ", d, " need [", k, ", ", d, "]");
}

}  // namespace

TensorDataset::TensorDataset(Tensor x, Tensor y) {
  MT_CHECK_AS(ValueError, x.defined() && y.defined(),
              "TensorDataset: features and targets must be defined tensors");
  MT_CHECK_AS(ShapeError, x.ndim() == 2, "TensorDataset: features must be [N, in], got ",
              x.shape());
  MT_CHECK_AS(ShapeError, y.ndim() == 1 || y.ndim() == 2,
              "TensorDataset: targets must be [N, out] or [N], got ", y.shape());
  MT_CHECK_AS(ShapeError, x.size(0) == y.size(0), "TensorDataset: features have ", x.size(0),
              " rows but targets have ", y.size(0), " (features ", x.shape(), ", targets ",
              y.shape(), ")");
  if (y.ndim() == 1) y = y.reshape({y.size(0), 1});
  x_ = host_float32(x);
  y_ = host_float32(y);
}

int64_t TensorDataset::size() const { return x_.size(0); }
int64_t TensorDataset::feature_dim() const { return x_.size(1); }
int64_t TensorDataset::target_dim() const { return y_.size(1); }

void TensorDataset::gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const {
  const int64_t k = static_cast<int64_t>(indices.size());
  check_batch_tensor(x, "x", k, feature_dim());
  check_batch_tensor(y, "y", k, target_dim());
  const int64_t n = size();
  for (int64_t i : indices)
    MT_CHECK_AS(ValueError, i >= 0 && i < n, "Dataset::gather: row ", i,
                " is out of range for a dataset of ", n, " rows");
  gather_rows(x_, indices, x);
  gather_rows(y_, indices, y);
}

}  // namespace minitrain

namespace minitrain {

TensorDataset subset(const Dataset& data, const std::vector<int64_t>& rows) {
  const auto k = static_cast<int64_t>(rows.size());
  Tensor x = Tensor::empty({k, data.feature_dim()});
  Tensor y = Tensor::empty({k, data.target_dim()});
  data.gather(rows, x, y);
  return TensorDataset(std::move(x), std::move(y));
}

}  // namespace minitrain
