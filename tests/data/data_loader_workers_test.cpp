// DataLoader workers (torch's num_workers): N threads prepare batches at once and next() returns
// them strictly in order, so every N gives the batches of the loader without workers, bit for bit,
// through epoch ends, seeks, and a batch whose preparation fails; the destructor joins them all.

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "data/data_loader.h"
#include "tests/core/io_test_util.h"
#include "tests/data/loader_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;
using testing::loader_opts;
using testing::numbered;
using testing::rows_of;
using testing::TestDataset;

// Gathers take a time that depends on their first row (0 to 4 ms), so the workers finish out of
// order and an in-order result has to be made, not met by luck.
class JitteryDataset final : public Dataset {
 public:
  explicit JitteryDataset(int64_t n) : inner_(numbered(n)) {}
  int64_t size() const override { return inner_->size(); }
  int64_t feature_dim() const override { return inner_->feature_dim(); }
  int64_t target_dim() const override { return inner_->target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    std::this_thread::sleep_for(std::chrono::milliseconds((indices.front() * 7) % 5));
    inner_->gather(indices, x, y);
  }

 private:
  std::shared_ptr<TensorDataset> inner_;
};

// Records the most gather() calls in progress at once. The first `meet` calls wait for each other
// (up to a generous deadline, so that a loader with fewer threads still ends), so that N workers
// that really run at once are seen at once however the threads are scheduled.
class ConcurrencyDataset final : public Dataset {
 public:
  ConcurrencyDataset(int64_t n, int meet) : inner_(numbered(n)), meet_(meet) {}
  int64_t size() const override { return inner_->size(); }
  int64_t feature_dim() const override { return inner_->feature_dim(); }
  int64_t target_dim() const override { return inner_->target_dim(); }
  void gather(const std::vector<int64_t>& indices, Tensor& x, Tensor& y) const override {
    {
      std::unique_lock<std::mutex> lock(mu_);
      max_inside_ = std::max(max_inside_, ++inside_);
      if (arrived_ < meet_) {
        ++arrived_;
        met_.notify_all();
        met_.wait_for(lock, std::chrono::seconds(10), [&] { return arrived_ >= meet_; });
      }
    }
    inner_->gather(indices, x, y);
    std::lock_guard<std::mutex> lock(mu_);
    --inside_;
  }
  int max_inside() const {
    std::lock_guard<std::mutex> lock(mu_);
    return max_inside_;
  }

 private:
  std::shared_ptr<TensorDataset> inner_;
  int meet_;
  mutable std::mutex mu_;
  mutable std::condition_variable met_;
  mutable int inside_ = 0, max_inside_ = 0, arrived_ = 0;
};

void expect_same_batch(const Batch& a, const Batch& b) {
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(host_values(a.x), host_values(b.x));
  EXPECT_EQ(host_values(a.y), host_values(b.y));
}

TEST(DataLoaderWorkers, EveryCountGivesTheBatchesOfTheCurrentLoader) {
  // The reference: batches prepared on the calling thread, and the default (one worker).
  auto data = std::make_shared<JitteryDataset>(23);  // batches of 5: 4 full and 1 of 3 an epoch
  DataLoader inline_loader(data, loader_opts(5, true, /*prefetch=*/2, /*seed=*/77, 0));
  DataLoader one_worker(data, loader_opts(5, true, 2, 77, 1));
  std::vector<Batch> want;
  for (int i = 0; i < 17; ++i) {  // 3 epochs and a bit, crossing epoch ends
    want.push_back(inline_loader.next());
    expect_same_batch(one_worker.next(), want.back());
  }
  for (int workers : {1, 2, 3, 4}) {
    for (int prefetch : {1, 3}) {
      SCOPED_TRACE("workers " + std::to_string(workers) + ", prefetch " + std::to_string(prefetch));
      DataLoader loader(data, loader_opts(5, true, prefetch, 77, workers));
      for (const Batch& w : want) expect_same_batch(loader.next(), w);
    }
  }
}

TEST(DataLoaderWorkers, NWorkersGatherAtOnce) {
  for (int workers : {2, 3, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    auto data = std::make_shared<ConcurrencyDataset>(64, workers);
    DataLoader loader(data, loader_opts(4, true, /*prefetch=*/2, /*seed=*/3, workers));
    for (int i = 0; i < 16; ++i) loader.next();
    EXPECT_EQ(data->max_inside(), workers);  // all at once, and never more than the workers
  }
}

TEST(DataLoaderWorkers, OneWorkerGathersAlone) {
  auto data = std::make_shared<ConcurrencyDataset>(64, /*meet=*/1);
  DataLoader loader(data, loader_opts(4, true, /*prefetch=*/8, /*seed=*/3, /*workers=*/1));
  for (int i = 0; i < 16; ++i) loader.next();
  EXPECT_EQ(data->max_inside(), 1);
}

TEST(DataLoaderWorkers, SeekThenNextEqualsIteratingThere) {
  auto data = std::make_shared<JitteryDataset>(11);  // batches of 3: 4 an epoch
  DataLoader walked(data, loader_opts(3, true, 2, 5, /*workers=*/0));
  std::vector<Batch> seq;
  for (int i = 0; i < 12; ++i) seq.push_back(walked.next());
  for (int workers : {2, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    // A fresh loader sent to epoch 2, batch 1 (sequence position 9), as a resumed run would be.
    DataLoader resumed(data, loader_opts(3, true, 2, 5, workers));
    resumed.seek(2, 1);
    for (int i = 9; i < 12; ++i) expect_same_batch(resumed.next(), seq[i]);
    // Back to the start after batches were prepared ahead (and while workers prepare more).
    resumed.seek(0, 2);
    for (int i = 2; i < 12; ++i) expect_same_batch(resumed.next(), seq[i]);
    resumed.seek(1, 0);
    expect_same_batch(resumed.next(), seq[4]);
  }
}

TEST(DataLoaderWorkers, AFailedBatchIsThrownInItsTurnAndRetried) {
  // Batches of 4 without shuffle: row 21 is in batch 5 of 8. Its first gather fails; the batches
  // after it, prepared meanwhile by other workers, still come in order once it is retried.
  const auto want = [] {
    DataLoader reference(numbered(32), loader_opts(4, false, 2, 1, 0));
    std::vector<Batch> all;
    for (int i = 0; i < 8; ++i) all.push_back(reference.next());
    return all;
  }();
  for (int workers : {1, 2, 3, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    auto data = std::make_shared<TestDataset>(32, /*bad_row=*/21, /*delay_ms=*/0, /*failures=*/1);
    DataLoader loader(data, loader_opts(4, false, /*prefetch=*/2, 1, workers));
    for (int i = 0; i < 5; ++i) expect_same_batch(loader.next(), want[i]);
    expect_error<IoError>([&] { loader.next(); }, {"row 21 is unreadable"});
    for (int i = 5; i < 8; ++i) expect_same_batch(loader.next(), want[i]);  // 5 retried
  }
}

TEST(DataLoaderWorkers, ABatchThatKeepsFailingIsNotSkipped) {
  for (int workers : {2, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    DataLoader loader(std::make_shared<TestDataset>(32, /*bad_row=*/13),
                      loader_opts(4, false, 2, 1, workers));
    for (int i = 0; i < 3; ++i) EXPECT_EQ(loader.next().index, i);
    for (int attempt = 0; attempt < 3; ++attempt)
      expect_error<IoError>([&] { loader.next(); }, {"row 13 is unreadable"});
    loader.seek(0, 4);
    EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{16, 17, 18, 19}));
  }
}

TEST(DataLoaderWorkers, DestructionJoinsEveryWorkerWithoutFillingTheWindow) {
  auto data = std::make_shared<TestDataset>(256, /*bad_row=*/-1, /*delay_ms=*/100);
  const int workers = 4, prefetch = 8;  // a window of 32 batches
  {
    DataLoader loader(data, loader_opts(2, true, prefetch, 1, workers));
    loader.next();
    while (data->started_.load() < 1 + workers) std::this_thread::yield();  // all are gathering
  }  // each worker ends the batch it is in, and starts no other
  EXPECT_EQ(data->ended_.load(), data->started_.load());  // none left running
  // Filling the window would have taken 33 gathers; each worker stops after its current batch
  // (2 rounds of 4 after the first batch; one more round of slack for a slow scheduler).
  EXPECT_LE(data->started_.load(), 1 + 3 * workers);
}

TEST(DataLoaderWorkers, RejectsCountsOutOfRangeNamingThem) {
  expect_error<ValueError>([] { DataLoader(numbered(5), loader_opts(2, true, 2, 1, -1)); },
                           {"workers", "-1"});
  expect_error<ValueError>(
      [] { DataLoader(numbered(5), loader_opts(2, true, 2, 1, kMaxLoaderWorkers + 1)); },
      {"workers", std::to_string(kMaxLoaderWorkers + 1), std::to_string(kMaxLoaderWorkers)});
  DataLoader most(numbered(5), loader_opts(2, true, 2, 1, kMaxLoaderWorkers));  // allowed
  EXPECT_EQ(most.options().workers, kMaxLoaderWorkers);
}

TEST(DataLoaderWorkers, PrefetchZeroStillMeansTheCallingThread) {
  auto data = std::make_shared<ConcurrencyDataset>(16, /*meet=*/1);
  DataLoader loader(data, loader_opts(4, true, /*prefetch=*/0, 1, /*workers=*/3));
  EXPECT_EQ(loader.options().workers, 0);
  loader.next();
  EXPECT_EQ(data->max_inside(), 1);
}

// ---- devices: pinned staging buffers shared by several workers ----

class DataLoaderWorkersDevice : public testing::DeviceTest {};

TEST_P(DataLoaderWorkersDevice, HeldBatchesKeepTheirRowsWhileWorkersRefillTheBuffers) {
  for (int workers : {2, 4}) {
    SCOPED_TRACE("workers " + std::to_string(workers));
    DataLoaderOptions o = loader_opts(3, true, /*prefetch=*/2, /*seed=*/4, workers);
    o.device = device();
    DataLoader loader(std::make_shared<JitteryDataset>(30), o);
    std::vector<Batch> held;
    for (int i = 0; i < 30; ++i) held.push_back(loader.next());  // 3 epochs of 10
    for (std::size_t i = 0; i < held.size(); ++i) {
      const Batch& b = held[i];
      EXPECT_EQ(b.x.device(), device());
      EXPECT_EQ(b.epoch, int64_t(i) / 10);
      EXPECT_EQ(b.index, int64_t(i) % 10);
      const auto order = epoch_order(30, true, 4, b.epoch);
      const std::vector<int64_t> want(order.begin() + 3 * b.index, order.begin() + 3 * b.index + 3);
      EXPECT_EQ(rows_of(b), want);
      EXPECT_EQ(host_values(b.x), testing::features_of(want));
    }
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(DataLoaderWorkersDevice);

}  // namespace
}  // namespace minitrain
