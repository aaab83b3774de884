// DistributedSampler (torch's index assignment, padding and drop_last, per-epoch seeding),
// WeightedRandomSampler (frequencies that follow the weights, the split over ranks, bad weights),
// and the DataLoader's sampler option.

#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <vector>

#include "data/data_loader.h"
#include "tests/core/io_test_util.h"
#include "tests/support/test_util.h"

namespace minitrain {
namespace {

using testing::expect_error;
using Ids = std::vector<int64_t>;

std::vector<Ids> all_ranks(int64_t n, int ranks, bool shuffle, uint64_t seed, bool drop_last,
                           int64_t epoch) {
  std::vector<Ids> out;
  for (int r = 0; r < ranks; ++r)
    out.push_back(DistributedSampler(n, ranks, r, shuffle, seed, drop_last).indices(epoch));
  return out;
}

// torch.utils.data.DistributedSampler(range(10), num_replicas=3, shuffle=False): the order 0..9 is
// padded with its first entries to 12 = [0..9, 0, 1], and rank r takes positions r, r+3, r+6, r+9.
TEST(DistributedSampler, TorchAssignmentTenRowsThreeRanksPadded) {
  const std::vector<Ids> got = all_ranks(10, 3, false, 0, false, 0);
  EXPECT_EQ(got[0], (Ids{0, 3, 6, 9}));
  EXPECT_EQ(got[1], (Ids{1, 4, 7, 0}));
  EXPECT_EQ(got[2], (Ids{2, 5, 8, 1}));
  EXPECT_EQ(DistributedSampler(10, 3, 1, false).size(), 4);
}

// drop_last=True truncates to 9 = floor(10 / 3) * 3: row 9 is in no rank's share.
TEST(DistributedSampler, TorchAssignmentTenRowsThreeRanksDropLast) {
  const std::vector<Ids> got = all_ranks(10, 3, false, 0, true, 0);
  EXPECT_EQ(got[0], (Ids{0, 3, 6}));
  EXPECT_EQ(got[1], (Ids{1, 4, 7}));
  EXPECT_EQ(got[2], (Ids{2, 5, 8}));
  EXPECT_EQ(DistributedSampler(10, 3, 2, false, 0, true).size(), 3);
}

// With shuffle the same rule applies to the epoch's permutation, which every rank computes alike.
TEST(DistributedSampler, ShuffledSharesFollowTheEpochOrder) {
  const Ids o = epoch_order(10, true, 7, 2);
  const std::vector<Ids> got = all_ranks(10, 3, true, 7, false, 2);
  EXPECT_EQ(got[0], (Ids{o[0], o[3], o[6], o[9]}));
  EXPECT_EQ(got[1], (Ids{o[1], o[4], o[7], o[0]}));
  EXPECT_EQ(got[2], (Ids{o[2], o[5], o[8], o[1]}));
}

TEST(DistributedSampler, SharesAreDisjointAndCoverEveryRow) {
  for (int64_t n : {1, 7, 12, 97}) {
    for (int ranks : {1, 2, 3, 5}) {
      std::multiset<int64_t> seen;
      for (const Ids& share : all_ranks(n, ranks, true, 11, false, 1))
        seen.insert(share.begin(), share.end());
      const int64_t total = (n + ranks - 1) / ranks * ranks;
      ASSERT_EQ(int64_t(seen.size()), total) << n << " rows, " << ranks << " ranks";
      for (int64_t r = 0; r < n; ++r) {
        // Every row once, plus the padding's repeats of the order's first total - n entries.
        EXPECT_GE(seen.count(r), 1u) << "row " << r << " of " << n << ", " << ranks << " ranks";
        EXPECT_LE(int64_t(seen.count(r)), 1 + (total - n + n - 1) / n);
      }
      if (n >= ranks) {
        std::set<int64_t> dropped;
        for (const Ids& share : all_ranks(n, ranks, true, 11, true, 1)) {
          for (int64_t i : share) EXPECT_TRUE(dropped.insert(i).second) << "row " << i << " twice";
        }
        EXPECT_EQ(int64_t(dropped.size()), n / ranks * ranks);
      }
    }
  }
}

TEST(DistributedSampler, DeterministicPerSeedAndEpochAndEpochsDiffer) {
  const DistributedSampler a(50, 2, 1, true, 5), b(50, 2, 1, true, 5), c(50, 2, 1, true, 6);
  EXPECT_EQ(a.indices(3), b.indices(3));
  EXPECT_NE(a.indices(3), a.indices(4));
  EXPECT_NE(a.indices(3), c.indices(3));
}

TEST(DistributedSampler, BadSettingsAreRefused) {
  expect_error<ValueError>([] { DistributedSampler(10, 3, 3); }, {"rank 3 is outside [0, 3)"});
  expect_error<ValueError>([] { DistributedSampler(10, 0, 0); },
                           {"num_replicas must be >= 1, got 0"});
  expect_error<ValueError>([] { DistributedSampler(0, 1, 0); }, {"the dataset is empty"});
  expect_error<ValueError>([] { DistributedSampler(2, 3, 0, false, 0, true); },
                           {"drop_last with 2 rows and 3 ranks"});
  expect_error<ValueError>([] { DistributedSampler(4, 1, 0).indices(-1); },
                           {"epoch must be >= 0, got -1"});
}

// Pearson's chi-square of draw counts against weights: with 5 drawable rows (4 degrees of freedom)
// the 99.99% quantile is 23.5, so a correct sampler stays well below 30 for a fixed seed, while a
// uniform draw (or one shifted by a row) lands in the thousands.
TEST(WeightedRandomSampler, FrequenciesFollowTheWeights) {
  const std::vector<double> w{1, 2, 3, 4, 0, 10};
  const int64_t draws = 40000;
  const Ids got = WeightedRandomSampler(w, draws, /*seed=*/3).indices(0);
  ASSERT_EQ(int64_t(got.size()), draws);
  std::vector<int64_t> count(w.size(), 0);
  for (int64_t i : got) {
    ASSERT_GE(i, 0);
    ASSERT_LT(i, int64_t(w.size()));
    ++count[static_cast<std::size_t>(i)];
  }
  EXPECT_EQ(count[4], 0) << "a row of weight 0 was drawn";
  double chi2 = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (w[i] == 0) continue;
    const double expected = draws * w[i] / 20.0;
    chi2 += (count[i] - expected) * (count[i] - expected) / expected;
  }
  EXPECT_LT(chi2, 30.0) << "counts " << count[0] << " " << count[1] << " " << count[2] << " "
                        << count[3] << " " << count[5];
}

TEST(WeightedRandomSampler, DeterministicPerSeedAndEpochAndEpochsDiffer) {
  const std::vector<double> w{0.5, 1, 1, 3};
  const WeightedRandomSampler a(w, 64, 9), b(w, 64, 9), c(w, 64, 10);
  EXPECT_EQ(a.indices(2), b.indices(2));
  EXPECT_NE(a.indices(2), a.indices(3));
  EXPECT_NE(a.indices(2), c.indices(2));
}

// N ranks split one draw: rank r holds draws r, r + N, ... of the one-rank sampler's epoch
// (whose num_samples is padded up to a multiple of N).
TEST(WeightedRandomSampler, RanksSplitTheSameDraw) {
  const std::vector<double> w{1, 5, 2, 2, 7};
  const Ids whole = WeightedRandomSampler(w, 12, 4).indices(1);
  for (int r = 0; r < 3; ++r) {
    const WeightedRandomSampler share(w, 10, 4, 3, r);
    ASSERT_EQ(share.size(), 4);
    const Ids got = share.indices(1);
    Ids want;
    for (std::size_t i = static_cast<std::size_t>(r); i < whole.size(); i += 3)
      want.push_back(whole[i]);
    EXPECT_EQ(got, want) << "rank " << r;
  }
}

TEST(WeightedRandomSampler, BadWeightsAreNamed) {
  expect_error<ValueError>([] { WeightedRandomSampler({1, -2, 3}, 4); }, {"weight 1 is -2"});
  expect_error<ValueError>([] { WeightedRandomSampler({1, 2, NAN}, 4); }, {"weight 2 is nan"});
  expect_error<ValueError>([] { WeightedRandomSampler({INFINITY}, 4); }, {"weight 0 is inf"});
  expect_error<ValueError>([] { WeightedRandomSampler({0, 0, 0}, 4); }, {"all 3 weights are 0"});
  expect_error<ValueError>([] { WeightedRandomSampler({}, 4); }, {"no weights"});
  expect_error<ValueError>([] { WeightedRandomSampler({1}, 0); },
                           {"num_samples must be >= 1, got 0"});
  expect_error<ValueError>([] { WeightedRandomSampler({1}, 3, 0, 2, 5); },
                           {"rank 5 is outside [0, 2)"});
}

// ---- the DataLoader's sampler option ----

// n rows whose y is the row number.
std::shared_ptr<TensorDataset> numbered(int64_t n) {
  std::vector<float> x, y;
  for (int64_t r = 0; r < n; ++r) {
    x.push_back(float(r));
    y.push_back(float(r));
  }
  return std::make_shared<TensorDataset>(Tensor::from_vector(x, {n, 1}),
                                         Tensor::from_vector(y, {n}));
}

Ids rows_of(const Batch& b) {
  Ids rows;
  for (double v : testing::host_values(b.y)) rows.push_back(int64_t(v));
  return rows;
}

TEST(DataLoaderSampler, BatchesAreRunsOfTheSamplersIndices) {
  for (int prefetch : {0, 2}) {
    DataLoaderOptions o;
    o.batch_size = 3;
    o.prefetch = prefetch;
    o.sampler = std::make_shared<DistributedSampler>(10, 3, 1, true, 8);
    DataLoader loader(numbered(10), o);
    ASSERT_EQ(loader.batches_per_epoch(), 2);  // 4 indices in batches of 3: 3 + 1
    for (int64_t epoch = 0; epoch < 2; ++epoch) {
      const Ids want = o.sampler->indices(epoch);
      const Batch b0 = loader.next(), b1 = loader.next();
      EXPECT_EQ(b0.epoch, epoch);
      EXPECT_EQ(rows_of(b0), (Ids{want[0], want[1], want[2]})) << "prefetch " << prefetch;
      EXPECT_EQ(rows_of(b1), (Ids{want[3]})) << "prefetch " << prefetch;
    }
    loader.seek(5, 1);
    EXPECT_EQ(rows_of(loader.next()), (Ids{o.sampler->indices(5)[3]}));
  }
}

TEST(DataLoaderSampler, WeightedSamplerBatchesAndDropLast) {
  DataLoaderOptions o;
  o.batch_size = 4;
  o.drop_last = true;
  o.prefetch = 0;
  o.sampler = std::make_shared<WeightedRandomSampler>(std::vector<double>{0, 1, 0, 1, 0}, 10, 2);
  DataLoader loader(numbered(5), o);
  ASSERT_EQ(loader.batches_per_epoch(), 2);  // 10 draws, batches of 4, the partial one dropped
  for (int i = 0; i < 4; ++i) {
    const Batch b = loader.next();
    ASSERT_EQ(b.y.size(0), 4);
    for (int64_t r : rows_of(b)) EXPECT_TRUE(r == 1 || r == 3) << "row " << r << " has weight 0";
  }
}

TEST(DataLoaderSampler, ASamplerForAnotherDatasetIsRefused) {
  DataLoaderOptions o;
  o.sampler = std::make_shared<DistributedSampler>(12, 2, 0);
  expect_error<ValueError>([&] { DataLoader(numbered(10), o); },
                           {"the sampler draws from 12 rows but the dataset has 10"});
}

}  // namespace
}  // namespace minitrain
