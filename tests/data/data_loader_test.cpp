// epoch_order and DataLoader: permutations drawn from (seed, epoch) alone, batches that cover each
// row once per epoch, partial and dropped last batches, resume by seek, the same batches with and
// without the background thread, errors that surface from next(), and a prompt destructor.

#include "data/data_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tests/core/io_test_util.h"
#include "tests/data/loader_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using testing::host_values;

using testing::numbered;
using testing::rows_of;
using testing::TestDataset;

DataLoaderOptions opts(int64_t batch_size, bool shuffle, int prefetch, uint64_t seed = 1) {
  return testing::loader_opts(batch_size, shuffle, prefetch, seed);
}

// ---- epoch_order ----

TEST(EpochOrder, IsAPermutation) {
  for (int64_t n : {1, 2, 3, 17, 1000}) {
    std::vector<int64_t> order = epoch_order(n, /*shuffle=*/true, /*seed=*/9, /*epoch=*/4);
    std::sort(order.begin(), order.end());
    std::vector<int64_t> want(n);
    std::iota(want.begin(), want.end(), 0);
    EXPECT_EQ(order, want) << "n = " << n;
  }
  EXPECT_TRUE(epoch_order(0, true, 9, 0).empty());
}

TEST(EpochOrder, IdentityWithoutShuffle) {
  std::vector<int64_t> want(50);
  std::iota(want.begin(), want.end(), 0);
  EXPECT_EQ(epoch_order(50, /*shuffle=*/false, /*seed=*/3, /*epoch=*/7), want);
  EXPECT_NE(epoch_order(50, /*shuffle=*/true, /*seed=*/3, /*epoch=*/7), want);
}

TEST(EpochOrder, IsAFunctionOfSeedAndEpochAlone) {
  const auto a = epoch_order(100, true, 42, 5);
  EXPECT_EQ(a, epoch_order(100, true, 42, 5));
  EXPECT_NE(a, epoch_order(100, true, 42, 6));
  EXPECT_NE(a, epoch_order(100, true, 43, 5));
  EXPECT_NE(epoch_order(100, true, 42, 0), epoch_order(100, true, 42, 1));
  expect_error<ValueError>([] { epoch_order(-1, true, 0, 0); }, {"-1"});
  expect_error<ValueError>([] { epoch_order(5, true, 0, -2); }, {"-2"});
}

TEST(EpochOrder, DrawsEveryPermutationEvenly) {
  // 3! = 6 permutations over 6000 epochs: each about 1000 times (sd 29). A biased shuffle
  // (Sattolo's, or j drawn from [0, i)) misses some permutations entirely.
  std::map<std::vector<int64_t>, int> counts;
  for (int64_t e = 0; e < 6000; ++e) counts[epoch_order(3, true, 11, e)]++;
  EXPECT_EQ(counts.size(), 6u);
  for (const auto& [perm, count] : counts) EXPECT_NEAR(count, 1000, 150);
}

// ---- batching ----

TEST(DataLoader, CoversEveryRowOncePerEpoch) {
  DataLoader loader(numbered(10), opts(3, /*shuffle=*/true, /*prefetch=*/2));
  ASSERT_EQ(loader.batches_per_epoch(), 4);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t i = 0; i < 4; ++i) {
      const Batch b = loader.next();
      EXPECT_EQ(b.epoch, epoch);
      EXPECT_EQ(b.index, i);
      const auto rows = rows_of(b);
      seen.insert(seen.end(), rows.begin(), rows.end());
      for (std::size_t k = 0; k < rows.size(); ++k) {  // x and y come from the same row
        EXPECT_EQ(host_values(b.x)[2 * k], double(rows[k]));
        EXPECT_EQ(host_values(b.x)[2 * k + 1], double(100 + rows[k]));
      }
    }
    EXPECT_EQ(seen, epoch_order(10, true, 1, epoch));
  }
}

TEST(DataLoader, KeepsAPartialLastBatch) {
  DataLoader loader(numbered(10), opts(4, /*shuffle=*/false, /*prefetch=*/0));
  EXPECT_EQ(loader.batches_per_epoch(), 3);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 3; ++i) sizes.push_back(loader.next().x.size(0));
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  const Batch again = loader.next();  // the next epoch starts with a full batch
  EXPECT_EQ(again.epoch, 1);
  EXPECT_EQ(rows_of(again), (std::vector<int64_t>{0, 1, 2, 3}));
}

TEST(DataLoader, DropLastSkipsThePartialBatch) {
  DataLoaderOptions o = opts(4, /*shuffle=*/false, /*prefetch=*/1);
  o.drop_last = true;
  DataLoader loader(numbered(10), o);
  EXPECT_EQ(loader.batches_per_epoch(), 2);
  std::vector<int64_t> sizes;
  for (int i = 0; i < 4; ++i) {
    const Batch b = loader.next();
    sizes.push_back(b.x.size(0));
    EXPECT_EQ(b.epoch, i / 2);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 4, 4}));
}

TEST(DataLoader, WithoutShuffleBatchesAreConsecutiveRows) {
  DataLoader loader(numbered(7), opts(3, /*shuffle=*/false, /*prefetch=*/2));
  EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{3, 4, 5}));
  EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{6}));
  EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{0, 1, 2}));
}

TEST(DataLoader, ShuffledEpochsDifferAndFollowTheSeed) {
  auto first_epoch = [](uint64_t seed, int64_t epochs) {
    DataLoader loader(numbered(40), opts(40, true, 1, seed));
    Batch b;
    for (int64_t e = 0; e < epochs; ++e) b = loader.next();
    return rows_of(b);
  };
  EXPECT_EQ(first_epoch(5, 1), first_epoch(5, 1));
  EXPECT_NE(first_epoch(5, 1), first_epoch(6, 1));
  EXPECT_NE(first_epoch(5, 1), first_epoch(5, 2));
}

TEST(DataLoader, SameBatchesWithAndWithoutPrefetch) {
  DataLoader inline_loader(numbered(23), opts(5, true, /*prefetch=*/0, /*seed=*/77));
  DataLoader threaded(numbered(23), opts(5, true, /*prefetch=*/3, /*seed=*/77));
  for (int i = 0; i < 17; ++i) {  // 3 epochs and a bit, crossing epoch boundaries
    const Batch a = inline_loader.next(), b = threaded.next();
    EXPECT_EQ(a.epoch, b.epoch);
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(host_values(a.x), host_values(b.x));
    EXPECT_EQ(host_values(a.y), host_values(b.y));
  }
}

TEST(DataLoader, SeekThenNextEqualsIteratingThere) {
  for (int prefetch : {0, 2}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    DataLoader walked(numbered(11), opts(3, true, prefetch, 5));  // 4 batches an epoch
    std::vector<Batch> seq;
    for (int i = 0; i < 11; ++i) seq.push_back(walked.next());
    // A fresh loader sent to epoch 2, batch 1 (sequence position 9), as a resumed run would be.
    DataLoader resumed(numbered(11), opts(3, true, prefetch, 5));
    resumed.seek(2, 1);
    for (int i = 9; i < 11; ++i) {
      const Batch b = resumed.next();
      EXPECT_EQ(b.epoch, seq[i].epoch);
      EXPECT_EQ(b.index, seq[i].index);
      EXPECT_EQ(rows_of(b), rows_of(seq[i]));
    }
    // Seeking back after batches were prepared ahead drops them.
    walked.seek(0, 2);
    const Batch back = walked.next();
    EXPECT_EQ(back.epoch, 0);
    EXPECT_EQ(back.index, 2);
    EXPECT_EQ(rows_of(back), rows_of(seq[2]));
    EXPECT_EQ(rows_of(walked.next()), rows_of(seq[3]));
    EXPECT_EQ(walked.next().epoch, 1);
  }
}

TEST(DataLoader, SeekRejectsPositionsOutsideAnEpoch) {
  DataLoader loader(numbered(10), opts(4, false, 1));
  expect_error<ValueError>([&] { loader.seek(0, 3); }, {"index 3", "3 batches"});
  expect_error<ValueError>([&] { loader.seek(0, -1); }, {"-1"});
  expect_error<ValueError>([&] { loader.seek(-1, 0); }, {"epoch", "-1"});
  loader.seek(4, 2);
  const Batch b = loader.next();
  EXPECT_EQ(b.epoch, 4);
  EXPECT_EQ(b.index, 2);
  EXPECT_EQ(rows_of(b), (std::vector<int64_t>{8, 9}));
}

TEST(DataLoader, RejectsBadOptions) {
  expect_error<ValueError>([] { DataLoader(numbered(5), opts(0, true, 1)); }, {"batch size", "0"});
  expect_error<ValueError>([] { DataLoader(numbered(5), opts(2, true, -1)); }, {"prefetch", "-1"});
  expect_error<ValueError>([] { DataLoader(nullptr, opts(2, true, 1)); }, {"null"});
  expect_error<ValueError>([] { DataLoader(std::make_shared<TestDataset>(0), opts(2, true, 1)); },
                           {"empty"});
  DataLoaderOptions o = opts(8, true, 1);
  o.drop_last = true;
  expect_error<ValueError>([&] { DataLoader(numbered(5), o); }, {"drop_last", "5 samples", "8"});
}

TEST(DataLoader, DatasetErrorSurfacesFromNextAndTheBatchIsRetried) {
  for (int prefetch : {0, 3}) {
    SCOPED_TRACE("prefetch " + std::to_string(prefetch));
    // Batches of 4 without shuffle: row 6 is in batch 1.
    DataLoader loader(std::make_shared<TestDataset>(12, /*bad_row=*/6), opts(4, false, prefetch));
    EXPECT_EQ(loader.next().index, 0);
    expect_error<IoError>([&] { loader.next(); }, {"row 6 is unreadable"});
    expect_error<IoError>([&] { loader.next(); }, {"row 6 is unreadable"});  // not skipped
    loader.seek(0, 2);
    EXPECT_EQ(rows_of(loader.next()), (std::vector<int64_t>{8, 9, 10, 11}));
  }
}

TEST(DataLoader, DestructionMidBatchStopsWithoutFillingTheQueue) {
  auto ds = std::make_shared<TestDataset>(64, /*bad_row=*/-1, /*delay_ms=*/100);
  {
    DataLoader loader(ds, opts(4, true, /*prefetch=*/8));
    loader.next();
    while (ds->started_.load() < 2) std::this_thread::yield();  // the worker is inside batch 1
  }  // joins: the worker finishes batch 1 and stops, without preparing batches 2..8
  EXPECT_EQ(ds->started_.load(), 2);
}

TEST(DataLoader, DestructionWithPreparedBatchesOrBeforeAnyNext) {
  auto ds = std::make_shared<TestDataset>(40);
  { DataLoader never_used(ds, opts(4, true, 3)); }
  EXPECT_EQ(ds->started_.load(), 0);  // the worker starts with the first next()
  {
    DataLoader loader(ds, opts(4, true, 3));
    loader.next();
    while (ds->started_.load() < 4) std::this_thread::yield();  // the queue fills up behind
  }
  EXPECT_EQ(ds->started_.load(), 4);  // batch 0 and the three queued behind it
}

// ---- devices ----

class DataLoaderDevice : public testing::DeviceTest {};

TEST_P(DataLoaderDevice, BatchesHoldTheRightRowsOnTheDevice) {
  DataLoaderOptions o = opts(4, true, /*prefetch=*/2, /*seed=*/21);
  o.device = device();
  DataLoader loader(numbered(10), o);
  for (int64_t epoch = 0; epoch < 2; ++epoch) {
    const auto order = epoch_order(10, true, 21, epoch);
    for (int64_t i = 0; i < 3; ++i) {
      const Batch b = loader.next();
      EXPECT_EQ(b.x.device(), device());
      EXPECT_EQ(b.y.device(), device());
      const int64_t k = std::min<int64_t>(4, 10 - 4 * i);
      ASSERT_EQ(b.x.shape(), Shape({k, 2}));
      ASSERT_EQ(b.y.shape(), Shape({k, 1}));
      const std::vector<int64_t> want(order.begin() + 4 * i, order.begin() + 4 * i + k);
      EXPECT_EQ(rows_of(b), want);
      EXPECT_EQ(host_values(b.x), testing::features_of(want));
    }
  }
}

TEST_P(DataLoaderDevice, BatchesStayIntactWhileManyAreHeld) {
  // Holding every batch of three epochs keeps the device blocks alive while the staging buffers
  // are refilled many times over: no batch may see a later batch's rows.
  DataLoaderOptions o = opts(3, true, /*prefetch=*/3, /*seed=*/4);
  o.device = device();
  DataLoader loader(numbered(30), o);
  std::vector<Batch> held;
  for (int i = 0; i < 30; ++i) held.push_back(loader.next());
  for (const Batch& b : held) {
    const auto order = epoch_order(30, true, 4, b.epoch);
    EXPECT_EQ(rows_of(b),
              std::vector<int64_t>(order.begin() + 3 * b.index, order.begin() + 3 * b.index + 3));
  }
}

MT_INSTANTIATE_DEVICE_TEST_SUITE(DataLoaderDevice);

}  // namespace
}  // namespace minitrain
