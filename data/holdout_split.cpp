// The seeded hold-out split: a permutation by data_loader.h's epoch_order (Philox, no Generator is
// touched, so the training run's random stream is the same with and without a split), per class
// when stratified (the held-out total rounded once and spread over the classes).

#include "data/holdout_split.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "core/error.h"
#include "data/data_loader.h"

namespace minitrain {
namespace {

// Apart from the shuffle's seed: the split's permutation is not epoch 0's order.
constexpr uint64_t kSplitSeedMix = 0xD1B54A32D192ED03ull;

// The first `take` of `rows` in a seeded order go to held_out, the rest to train.
void split_group(const std::vector<int64_t>& rows, int64_t take, uint64_t seed, HoldoutSplit& s) {
  const std::vector<int64_t> order =
      epoch_order(static_cast<int64_t>(rows.size()), /*shuffle=*/true, seed, 0);
  for (std::size_t i = 0; i < order.size(); ++i)
    (static_cast<int64_t>(i) < take ? s.held_out : s.train)
        .push_back(rows[static_cast<std::size_t>(order[i])]);
}

}  // namespace

HoldoutSplit holdout_split(int64_t n, double fraction, uint64_t seed,
                           const std::vector<int64_t>& labels) {
  MT_CHECK_AS(ValueError, fraction > 0 && fraction < 1,
              "holdout_split: the held-out fraction must be in (0, 1), got ", fraction);
  MT_CHECK_AS(ValueError, n >= 2, "holdout_split: ", n,
              " row(s) cannot be split into training and held-out rows (need at least 2)");
  MT_CHECK_AS(ValueError, labels.empty() || static_cast<int64_t>(labels.size()) == n,
              "holdout_split: ", labels.size(), " labels for ", n, " rows");
  HoldoutSplit s;
  const uint64_t base = seed ^ kSplitSeedMix;
  if (labels.empty()) {
    std::vector<int64_t> all(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
    const auto take = static_cast<int64_t>(std::llround(fraction * static_cast<double>(n)));
    split_group(all, std::clamp<int64_t>(take, 1, n - 1), base, s);
  } else {
    // Stratified as scikit-learn's train_test_split(stratify=): the total is rounded once,
    // n_held = ceil(fraction x n) (less a hair, so that 0.7 x 10 = 7.000000000000001 is 7), kept in
    // [1, n - 1], and spread over the classes by largest remainder: each class gets
    // floor(n_held x its rows / n) and the classes with the largest remainders one more (ties in a
    // seeded order). Rounding each class alone held out 19 of 20 one-row classes at 0.5.
    std::map<int64_t, std::vector<int64_t>> by_class;  // ordered: the split is reproducible
    for (int64_t i = 0; i < n; ++i) by_class[labels[static_cast<std::size_t>(i)]].push_back(i);
    const auto held = std::clamp<int64_t>(
        static_cast<int64_t>(std::ceil(fraction * static_cast<double>(n) - 1e-9)), 1, n - 1);
    const auto k = static_cast<int64_t>(by_class.size());
    std::vector<int64_t> take(static_cast<std::size_t>(k)), remainder(take.size());
    int64_t given = 0, c = 0;
    for (const auto& [label, rows] : by_class) {
      const auto count = static_cast<int64_t>(rows.size());  // held x count <= n^2: no overflow
      take[static_cast<std::size_t>(c)] = held * count / n;  // for the n a table holds
      remainder[static_cast<std::size_t>(c)] = held * count % n;
      given += take[static_cast<std::size_t>(c++)];
    }
    std::vector<int64_t> order = epoch_order(k, /*shuffle=*/true, base, 0);  // the ties' order
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return remainder[static_cast<std::size_t>(a)] > remainder[static_cast<std::size_t>(b)];
    });
    // The remainders sum to n x (held - given), each below n: enough classes have one.
    for (int64_t i = 0; given < held; ++i, ++given) ++take[static_cast<std::size_t>(order[i])];
    c = 0;
    for (const auto& [label, rows] : by_class)
      split_group(rows, take[static_cast<std::size_t>(c++)],
                  base + static_cast<uint64_t>(label) * 0x9E3779B97F4A7C15ull, s);
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.held_out.begin(), s.held_out.end());
  return s;
}

}  // namespace minitrain
