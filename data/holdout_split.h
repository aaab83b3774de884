#pragma once
// Holding out part of a data set for validation (--val-split): which rows train and which are
// held out, a pure function of the seed, so that a resumed run and every ddp rank split alike.

#include <cstdint>
#include <vector>

namespace minitrain {

struct HoldoutSplit {
  std::vector<int64_t> train, held_out;  ///< row indices, each ascending
};

/// Holds out round(fraction x n) of `n` rows (at least 1, at most n - 1), chosen by a seeded
/// permutation. With `labels` (one class per row, any integers) the split is stratified as
/// scikit-learn's train_test_split(stratify=): ceil(fraction x n) rows (at least 1, at most
/// n - 1) are held out, spread over the classes in proportion by largest remainder.
/// ValueError for fraction outside (0, 1), n < 2, or labels of another length.
HoldoutSplit holdout_split(int64_t n, double fraction, uint64_t seed,
                           const std::vector<int64_t>& labels = {});

}  // namespace minitrain
