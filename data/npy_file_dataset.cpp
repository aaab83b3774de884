// Rows of X.npy read on demand. The per-row conversion handles the file's dtype (float32 or
// float64) and byte order, so any .npy read_npy takes reads here too.

#include "data/npy_file_dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "kernels/cast.h"

namespace minitrain {
namespace {

constexpr int64_t kScanBytes = 4 << 20;  // the finite check's chunk

template <typename T>
T swapped(T v) {
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  std::reverse(b, b + sizeof(T));
  std::memcpy(&v, b, sizeof(T));
  return v;
}

// `count` values of the file's type from `src` as float32 into `dst`.
void to_float(const unsigned char* src, int64_t count, const NpyLayout& l, float* dst) {
  for (int64_t i = 0; i < count; ++i) {
    if (l.dtype == DType::Float32) {
      float v;
      std::memcpy(&v, src + i * 4, 4);
      dst[i] = l.swap_bytes ? swapped(v) : v;
    } else {
      double v;
      std::memcpy(&v, src + i * 8, 8);
      dst[i] = static_cast<float>(l.swap_bytes ? swapped(v) : v);
    }
  }
}

}  // namespace

NpyFileDataset::NpyFileDataset(const std::string& features_path, const std::string& targets_path)
    : x_(features_path), layout_(read_npy_layout(features_path)) {
  const Shape& s = layout_.shape;
  MT_CHECK_AS(ShapeError, s.ndim() == 2, "features file '", features_path,
              "' holds an array of shape ", s,
              "; features must be [N, in] (reshape a 1-D array of N samples to [N, 1])");
  rows_ = s[0];
  in_ = s[1];
  MT_CHECK_AS(IoError, rows_ > 0, "features file '", features_path, "' holds no rows (shape ", s,
              "); a dataset needs at least one sample");
  Tensor y = read_npy(targets_path, Device::cpu(), NpyIntegers::AsFloat64);  // labels may be ints
  MT_CHECK_AS(ShapeError, y.ndim() == 1 || y.ndim() == 2, "targets file '", targets_path,
              "' holds an array of shape ", y.shape(), "; targets must be [N, out] or [N]");
  MT_CHECK_AS(ShapeError, y.size(0) == rows_, "features and targets have different row counts: '",
              features_path, "' is ", s, " (", rows_, " rows) but '", targets_path, "' is ",
              y.shape(), " (", y.size(0), " rows)");
  if (y.ndim() == 1) y = y.reshape({rows_, 1});
  y_ = y.dtype() == DType::Float32 ? y : cast(y, DType::Float32);
  for (float v : y_.to_vector<float>())
    MT_CHECK_AS(ValueError, std::isfinite(v), "targets file '", targets_path,
                "' holds a non-finite value; training data must be finite");

  // One pass over X for NaN and inf, a chunk of rows at a time.
  const int64_t chunk_rows = std::max<int64_t>(1, kScanBytes / std::max<int64_t>(1, in_ * 8));
  std::vector<float> buf(static_cast<std::size_t>(chunk_rows * in_));
  for (int64_t begin = 0; begin < rows_; begin += chunk_rows) {
    const int64_t count = std::min(chunk_rows, rows_ - begin);
    read_rows(begin, count, buf.data());
    for (int64_t i = 0; i < count * in_; ++i)
      if (!std::isfinite(buf[static_cast<std::size_t>(i)]))
        MT_THROW(ValueError, "features file '", features_path, "' holds ",
                 std::isnan(buf[static_cast<std::size_t>(i)]) ? "NaN" : "inf", " at row ",
                 begin + i / in_, ", column ", i % in_, " (0-based, shape ", s,
                 "); training data must be finite: drop or fill the row (e.g. np.nan_to_num)");
  }
}

void NpyFileDataset::read_rows(int64_t begin, int64_t count, float* dst) const {
  const int64_t item = static_cast<int64_t>(dtype_size(layout_.dtype));
  const int64_t bytes = count * in_ * item;
  std::vector<unsigned char> raw(static_cast<std::size_t>(bytes));
  x_.read_at(layout_.data_offset + static_cast<uint64_t>(begin * in_ * item), raw.data(),
             raw.size());
  to_float(raw.data(), count * in_, layout_, dst);
}

void NpyFileDataset::gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const {
  const auto k = static_cast<int64_t>(indices.size());
  MT_CHECK_AS(ShapeError,
              x.ndim() == 2 && x.size(0) == k && x.size(1) == in_ && y.ndim() == 2 &&
                  y.size(0) == k && y.size(1) == y_.size(1),
              "NpyFileDataset::gather: outputs ", x.shape(), " and ", y.shape(), " for ", k,
              " rows of ", in_, " features and ", y_.size(1), " targets");
  for (int64_t i : indices)
    MT_CHECK_AS(ValueError, i >= 0 && i < rows_, "Dataset::gather: row ", i,
                " is out of range for a dataset of ", rows_, " rows");
  float* xs = x.data<float>();
  float* ys = y.data<float>();
  const float* yt = y_.data<float>();
  const int64_t out = y_.size(1);
  for (int64_t j = 0; j < k;) {
    int64_t run = 1;  // consecutive rows (an unshuffled epoch) are one read
    while (j + run < k &&
           indices[static_cast<std::size_t>(j + run)] == indices[static_cast<std::size_t>(j)] + run)
      ++run;
    read_rows(indices[static_cast<std::size_t>(j)], run, xs + j * in_);
    for (int64_t r = 0; r < run; ++r)
      std::memcpy(ys + (j + r) * out, yt + indices[static_cast<std::size_t>(j + r)] * out,
                  static_cast<std::size_t>(out) * sizeof(float));
    j += run;
  }
}

RowsOf::RowsOf(std::shared_ptr<const Dataset> base, std::vector<int64_t> rows)
    : base_(std::move(base)), rows_(std::move(rows)) {
  for (int64_t r : rows_)
    MT_CHECK_AS(ValueError, r >= 0 && r < base_->size(), "RowsOf: row ", r,
                " is out of range for a dataset of ", base_->size(), " rows");
}

void RowsOf::gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    MT_CHECK_AS(ValueError, i >= 0 && i < size(), "Dataset::gather: row ", i,
                " is out of range for a dataset of ", size(), " rows");
    mapped.push_back(rows_[static_cast<std::size_t>(i)]);
  }
  base_->gather(mapped, x, y);
}

}  // namespace minitrain
