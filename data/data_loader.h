#pragma once
// Batches in training order. With shuffle, each epoch's order is a permutation drawn from
// (seed, epoch) alone, so any position can be recomputed: a resumed run continues with exactly
// the batches it would have seen. A background thread gathers the next batches while the current
// one trains; on a GPU the host copy uses pinned memory and an asynchronous copy.

#include <cstdint>
#include <memory>
#include <vector>

#include "core/device.h"
#include "data/dataset.h"
#include "data/sampler.h"

namespace minitrain {

struct DataLoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;
  bool drop_last = false;  ///< drop a last partial batch (torch's drop_last)
  uint64_t seed = 0;
  Device device = Device::cpu();
  int prefetch = 2;  ///< batches prepared ahead; 0 = prepare on the calling thread
  /// The rows of each epoch and their order (data/sampler.h), in place of epoch_order(n, shuffle,
  /// seed, epoch); `shuffle` and `seed` are then the sampler's business. null: every row, by
  /// epoch_order. Batches are consecutive runs of the sampler's indices.
  std::shared_ptr<const Sampler> sampler;
};

struct Batch {
  Tensor x, y;        ///< on options.device
  int64_t epoch = 0;  ///< from 0
  int64_t index = 0;  ///< batch index within the epoch, from 0
};

/// The epoch's row order: 0..n-1, or a seeded Fisher-Yates permutation (Philox-driven; Note
/// [epoch order] in data_loader.cpp). A pure function of its arguments. ValueError for n < 0 or
/// epoch < 0.
std::vector<int64_t> epoch_order(int64_t n, bool shuffle, uint64_t seed, int64_t epoch);

/// One consumer: next() and seek() are called from one thread at a time. On a GPU, batches are
/// allocated and copied on the stream of options.device that was current on the constructing
/// thread (Note [data loader streams] in data_loader.cpp): consume them on that stream, and keep
/// it alive (a thread's default stream lives as long as the thread) while the loader exists.
class DataLoader {
 public:
  /// ValueError for a null dataset, batch_size < 1, prefetch < 0, an empty dataset, a sampler
  /// drawing from another number of rows than the dataset has, or drop_last leaving no batch;
  /// DeviceError for an unusable device. The background thread starts with the first next(); the
  /// destructor stops it after at most the batch it is preparing.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const noexcept;
  /// The next batch, moving into the next epoch after the last one. An exception from the
  /// dataset (or the copy) is re-thrown here; the position stays, so calling next() again
  /// retries that batch.
  Batch next();
  /// Positions the loader so that next() returns batch `index` of epoch `epoch` (for resume);
  /// batches prepared ahead are dropped. ValueError for epoch < 0 or an index outside
  /// [0, batches_per_epoch()).
  void seek(int64_t epoch, int64_t index);
  const DataLoaderOptions& options() const noexcept { return options_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  DataLoaderOptions options_;
};

}  // namespace minitrain
