#pragma once
// Samplers: which dataset rows an epoch visits, in which order. A sampler's indices are a pure
// function of its settings and the epoch, so any position of a run can be recomputed (resume) and
// every rank of a job computes the same epoch without talking to the others.
//
//   DistributedSampler     torch.utils.data.DistributedSampler: the epoch's order (data_loader.h's
//                          epoch_order, the same on every rank) padded or truncated to a multiple
//                          of the ranks, and rank r takes order[r], order[r + N], order[r + 2N],
//                          ...
//   WeightedRandomSampler  torch.utils.data.WeightedRandomSampler(weights, num_samples,
//                          replacement=True): rows drawn with probability proportional to their
//                          weight, from Philox seeded by (seed, epoch); with N ranks the epoch's
//                          draw is made identically on every rank and split r, r + N, ...

#include <cstdint>
#include <vector>

namespace minitrain {

class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The row indices of `epoch` (from 0), in training order; size() of them. ValueError for epoch <
  /// 0.
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  /// Indices per epoch (this rank's share).
  virtual int64_t size() const noexcept = 0;
  /// The number of rows the indices are drawn from (the dataset's size).
  virtual int64_t source_size() const noexcept = 0;
};

class DistributedSampler final : public Sampler {
 public:
  /// `n` rows shared by `num_replicas` ranks; this is rank `rank`. drop_last=false pads the order
  /// to ceil(n / N) * N by repeating its first entries; drop_last=true truncates it to
  /// floor(n / N) * N. ValueError for n < 1, num_replicas < 1, a rank outside [0, N), or
  /// drop_last with fewer rows than ranks.
  DistributedSampler(int64_t n, int num_replicas, int rank, bool shuffle = true, uint64_t seed = 0,
                     bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const noexcept override { return per_rank_; }
  int64_t source_size() const noexcept override { return n_; }
  int num_replicas() const noexcept { return num_replicas_; }
  int rank() const noexcept { return rank_; }

 private:
  int64_t n_;
  int num_replicas_, rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t per_rank_;
};

class WeightedRandomSampler final : public Sampler {
 public:
  /// Draws `num_samples` rows per epoch (over all ranks; padded up to a multiple of the ranks by
  /// drawing more) with replacement, row i with probability weights[i] / sum(weights); rank `rank`
  /// of `num_replicas` takes draws r, r + N, ... ValueError for no weights, a negative or
  /// non-finite weight (naming its index and value), all weights zero, num_samples < 1, or a bad
  /// rank.
  WeightedRandomSampler(std::vector<double> weights, int64_t num_samples, uint64_t seed = 0,
                        int num_replicas = 1, int rank = 0);
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const noexcept override { return per_rank_; }
  int64_t source_size() const noexcept override { return static_cast<int64_t>(cumulative_.size()); }

 private:
  std::vector<double> cumulative_;  // running sums of the weights; the last is the total
  int64_t num_samples_;
  uint64_t seed_;
  int num_replicas_, rank_;
  int64_t per_rank_;
};

}  // namespace minitrain
