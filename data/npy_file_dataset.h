#pragma once
// Data larger than memory (--data-on-disk): features X.npy read from the file as batches need
// them, rows at a time with pread, instead of loaded; the targets Y.npy (a column or a few per row,
// small beside the features) are held in memory. The process keeps no copy of X, so its memory
// stays flat whatever X's size, and the operating system's page cache keeps what fits in RAM.
// (pread rather than mmap: a mapping's touched pages count in the process's resident memory, and a
// memory cap or a job's limit would see the whole file.)

#include <cstdint>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/npy.h"
#include "data/dataset.h"

namespace minitrain {

class NpyFileDataset final : public Dataset {
 public:
  /// The checks of load_npy_dataset (data/readers.h): shapes, row counts, and finite values, found
  /// by one pass over X in chunks of a few MiB (its memory is not kept).
  NpyFileDataset(const std::string& features_path, const std::string& targets_path);
  int64_t size() const override { return rows_; }
  int64_t feature_dim() const override { return in_; }
  int64_t target_dim() const override { return y_.size(1); }
  /// Reads the rows (consecutive indices in one read) and converts them to float32. Safe to call
  /// from several threads: reads do not move a shared position.
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override;
  /// The targets, float32 [N, out] on the CPU.
  const Tensor& targets() const noexcept { return y_; }

 private:
  // Rows [begin, begin + count) of X into dst (float32, row-major).
  void read_rows(int64_t begin, int64_t count, float* dst) const;

  InputFile x_;
  NpyLayout layout_;
  int64_t rows_ = 0, in_ = 0;
  Tensor y_;
};

/// A view of rows of another data set, in the given order (a held-out split of data that is not
/// to be copied). ValueError for a row out of range.
class RowsOf final : public Dataset {
 public:
  RowsOf(std::shared_ptr<const Dataset> base, std::vector<int64_t> rows);
  int64_t size() const override { return static_cast<int64_t>(rows_.size()); }
  int64_t feature_dim() const override { return base_->feature_dim(); }
  int64_t target_dim() const override { return base_->target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override;

 private:
  std::shared_ptr<const Dataset> base_;
  std::vector<int64_t> rows_;
};

}  // namespace minitrain
