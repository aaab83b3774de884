#pragma once
// Datasets of (features, targets) rows. Everything minitrain reads fits in host memory, so a
// dataset is two float32 CPU tensors, X [N, in] and Y [N, out]; batches are gathered rows.

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace minitrain {

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual int64_t feature_dim() const = 0;
  virtual int64_t target_dim() const = 0;
  /// Copies rows `indices` into x [k, in] and y [k, out] (CPU float32, preallocated). Called from
  /// the DataLoader's worker threads, several at once when it has more than one (each with its
  /// own x and y): implementations must be safe to call concurrently (read-only state, or their
  /// own locking). An exception reaches the caller of DataLoader::next().
  virtual void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const = 0;
};

class TensorDataset final : public Dataset {
 public:
  /// x [N, in] and y [N, out] (a 1-D y becomes [N, 1]); float32 or float64, any device: stored as
  /// float32 on the CPU (a float32 CPU tensor is shared, not copied, as torch's TensorDataset
  /// does). ShapeError when the row counts differ (naming both shapes) or x is not 2-D.
  TensorDataset(Tensor x, Tensor y);
  int64_t size() const override;
  int64_t feature_dim() const override;
  int64_t target_dim() const override;
  /// ValueError for an index outside [0, N); Shape/DType/DeviceError for wrong outputs.
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override;
  const Tensor& features() const noexcept { return x_; }
  const Tensor& targets() const noexcept { return y_; }

 private:
  Tensor x_, y_;
};

/// The rows `rows` of `data`, in that order, as a new TensorDataset (a copy); ValueError for a row
/// out of range.
TensorDataset subset(const Dataset& data, const std::vector<int64_t>& rows);

}  // namespace minitrain
