// The seeded hold-out split: a permutation by data_loader.h's epoch_order (Philox, no Generator is
// touched, so the training run's random stream is the same with and without a split), per class
// when stratified.

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
    std::map<int64_t, std::vector<int64_t>> by_class;  // ordered: the split is reproducible
    for (int64_t i = 0; i < n; ++i) by_class[labels[static_cast<std::size_t>(i)]].push_back(i);
    for (const auto& [label, rows] : by_class) {
      const auto take =
          static_cast<int64_t>(std::llround(fraction * static_cast<double>(rows.size())));
      split_group(rows, take, base + static_cast<uint64_t>(label) * 0x9E3779B97F4A7C15ull, s);
    }
    // Tiny or very skewed sets can round every class to 0 (or to all): keep both sides non-empty.
    if (s.held_out.empty()) {
      s.held_out.push_back(s.train.back());
      s.train.pop_back();
    } else if (s.train.empty()) {
      s.train.push_back(s.held_out.back());
      s.held_out.pop_back();
    }
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.held_out.begin(), s.held_out.end());
  return s;
}

}  // namespace minitrain
