// DistributedSampler and WeightedRandomSampler: index lists as pure functions of (settings, epoch).

#include "data/sampler.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/philox.h"
#include "data/data_loader.h"

namespace minitrain {
namespace {

void check_rank(const char* who, int num_replicas, int rank) {
  MT_CHECK_AS(ValueError, num_replicas >= 1, who, ": num_replicas must be >= 1, got ",
              num_replicas);
  MT_CHECK_AS(ValueError, rank >= 0 && rank < num_replicas, who, ": rank ", rank,
              " is outside [0, ", num_replicas, "); a rank is 0 to num_replicas - 1");
}

// Tags the weighted draw's counters apart from the shuffle's ("SHUF") and a Generator's (upper
// words zero): "WGHT" in ASCII.
constexpr uint32_t kWeightedTag = 0x57474854u;

}  // namespace

DistributedSampler::DistributedSampler(int64_t n, int num_replicas, int rank, bool shuffle,
                                       uint64_t seed, bool drop_last)
    : n_(n),
      num_replicas_(num_replicas),
      rank_(rank),
      shuffle_(shuffle),
      seed_(seed),
      drop_last_(drop_last) {
  MT_CHECK_AS(ValueError, n >= 1, "DistributedSampler: the dataset is empty (", n, " rows)");
  check_rank("DistributedSampler", num_replicas, rank);
  MT_CHECK_AS(ValueError, !drop_last || n >= num_replicas, "DistributedSampler: drop_last with ", n,
              " rows and ", num_replicas,
              " ranks leaves no row for a rank; use fewer ranks or keep the padding");
  // torch: drop_last truncates to floor(n / N) * N, else pads to ceil(n / N) * N.
  per_rank_ = drop_last ? n / num_replicas : (n + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  MT_CHECK_AS(ValueError, epoch >= 0, "DistributedSampler: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> order = epoch_order(n_, shuffle_, seed_, epoch);  // the same on every rank
  const int64_t total = per_rank_ * num_replicas_;
  // Padding repeats the order from its start (several times over when n < N - n % N, as torch
  // does).
  for (int64_t i = n_; i < total; ++i)
    order.push_back(order[static_cast<std::size_t>((i - n_) % n_)]);
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank_));
  for (int64_t i = rank_; i < total; i += num_replicas_)
    mine.push_back(order[static_cast<std::size_t>(i)]);
  return mine;
}

WeightedRandomSampler::WeightedRandomSampler(std::vector<double> weights, int64_t num_samples,
                                             uint64_t seed, int num_replicas, int rank)
    : num_samples_(num_samples), seed_(seed), num_replicas_(num_replicas), rank_(rank) {
  MT_CHECK_AS(ValueError, !weights.empty(),
              "WeightedRandomSampler: no weights; give one weight per row");
  MT_CHECK_AS(ValueError, num_samples >= 1, "WeightedRandomSampler: num_samples must be >= 1, got ",
              num_samples);
  check_rank("WeightedRandomSampler", num_replicas, rank);
  cumulative_.resize(weights.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    const double w = weights[i];
    if (!std::isfinite(w) || w < 0)
      MT_THROW(ValueError, "WeightedRandomSampler: weight ", i, " is ", w,
               "; weights must be finite and >= 0 (a row with weight 0 is never drawn)");
    sum += w;
    cumulative_[i] = sum;
  }
  MT_CHECK_AS(ValueError, sum > 0, "WeightedRandomSampler: all ", weights.size(),
              " weights are 0; at least one row needs a positive weight");
  MT_CHECK_AS(ValueError, std::isfinite(sum), "WeightedRandomSampler: the weights sum to ", sum,
              "; scale them down");
  per_rank_ = (num_samples + num_replicas - 1) / num_replicas;
}

// Note [weighted draw]: draw i of an epoch takes Philox block {i low, i high, epoch low, epoch high
// ^ "WGHT"} with key = seed, makes u in [0, 1) from the top 53 bits of words 0-1, and picks the
// first row whose running weight sum exceeds u * total (inverse CDF by binary search; rows of
// weight 0 add no width, so they are never picked). Draw i depends on i alone, so rank r computing
// only its draws r, r + N, ... gets exactly its share of the one epoch-wide draw all ranks agree
// on.
std::vector<int64_t> WeightedRandomSampler::indices(int64_t epoch) const {
  MT_CHECK_AS(ValueError, epoch >= 0, "WeightedRandomSampler: epoch must be >= 0, got ", epoch);
  const auto e = static_cast<uint64_t>(epoch);
  const philox::Key key{{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)}};
  const double total = cumulative_.back();
  // The last row with a positive weight, for the rare u * total that rounds up to the total.
  const auto last_positive = static_cast<int64_t>(
      std::lower_bound(cumulative_.begin(), cumulative_.end(), total) - cumulative_.begin());
  const int64_t draws = per_rank_ * num_replicas_;
  std::vector<int64_t> mine;
  mine.reserve(static_cast<std::size_t>(per_rank_));
  for (int64_t i = rank_; i < draws; i += num_replicas_) {
    const auto c = static_cast<uint64_t>(i);
    const philox::Block ctr{{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32),
                             static_cast<uint32_t>(e),
                             static_cast<uint32_t>(e >> 32) ^ kWeightedTag}};
    const philox::Block bits = philox::philox4x32(ctr, key);
    const uint64_t r = (static_cast<uint64_t>(bits.w[0]) << 32) | bits.w[1];
    const double u = static_cast<double>(r >> 11) * 0x1.0p-53;
    auto row = static_cast<int64_t>(
        std::upper_bound(cumulative_.begin(), cumulative_.end(), u * total) - cumulative_.begin());
    mine.push_back(std::min(row, last_positive));
  }
  return mine;
}

}  // namespace minitrain
