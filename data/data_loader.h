#pragma once
// Batches in training order. With shuffle, each epoch's order is a permutation drawn from
// (seed, epoch) alone, so any position can be recomputed: a resumed run continues with exactly
// the batches it would have seen. Worker threads (torch's num_workers) gather the next batches
// while the current one trains, several at once, and next() hands them out strictly in order, so
// the batches are the same, bit for bit, for any number of workers; on a GPU the host copy uses
// pinned memory and an asynchronous copy.

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
  /// Threads preparing batches (gather, shuffle, pinned copies) ahead of the consumer, several at
  /// once (torch's num_workers); 0 = prepare each batch on the calling thread, in next().
  int workers = 1;
  /// Batches each worker prepares ahead (torch's prefetch_factor): at most workers x prefetch
  /// batches are ready or in preparation beyond the consumer. 0 = prepare on the calling thread,
  /// as workers = 0.
  int prefetch = 2;
  /// The rows of each epoch and their order (data/sampler.h), in place of epoch_order(n, shuffle,
  /// seed, epoch); `shuffle` and `seed` are then the sampler's business. null: every row, by
  /// epoch_order. Batches are consecutive runs of the sampler's indices.
  std::shared_ptr<const Sampler> sampler;
};

/// The most workers a loader takes: far beyond any machine's cores, low enough that a typo (an
/// extra digit) is an error rather than thousands of threads.
inline constexpr int kMaxLoaderWorkers = 1024;

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
  /// ValueError for a null dataset, batch_size < 1, workers outside [0, kMaxLoaderWorkers],
  /// prefetch < 0, an empty dataset, a sampler drawing from another number of rows than the
  /// dataset has, or drop_last leaving no batch; DeviceError for an unusable device. With
  /// workers > 1 the dataset's gather() is called from several threads at once. The workers start
  /// with the first next(); the destructor stops them after at most the batch each is preparing.
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  int64_t batches_per_epoch() const noexcept;
  /// The next batch, moving into the next epoch after the last one. An exception from the
  /// dataset (or the copy) is re-thrown here when its batch is due, after every batch before it;
  /// the position stays, so calling next() again retries that batch.
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
