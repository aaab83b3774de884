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
/// permutation. With `labels` (one class per row, any integers) the split is stratified: each
/// class gives round(fraction x its rows) (so rare classes appear on both sides when they can).
/// ValueError for fraction outside (0, 1), n < 2, or labels of another length.
HoldoutSplit holdout_split(int64_t n, double fraction, uint64_t seed,
                           const std::vector<int64_t>& labels = {});

}  // namespace minitrain
