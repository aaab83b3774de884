#pragma once
// Local SGD (--parallel ddp --sync-every K): the ranks step on their own, every backward local
// (no gradient all-reduce), and their replicas are averaged after the optimizer step of every sync
// point: every K-th step, the run's last step, and any step after which the weights are read (a
// checkpoint, also a stop's; a held-out evaluation). A checkpoint holds one optimizer state, so at
// a checkpoint the optimizer moments are averaged too (always with --sync-optimizer-state), and a
// resumed run goes on as an uninterrupted one. The rest (loss, counts, files) is DdpSync's.

#include <cstdint>

#include "optim/optimizer.h"
#include "train/ddp_sync.h"

namespace minitrain {

class LocalSgdSync final : public DdpSync {
 public:
  /// `sync_every` >= 1 (ValueError otherwise); `moments`: average the optimizer's moments at every
  /// sync point, not only at checkpoints. `model` and `optimizer` outlive this object.
  LocalSgdSync(DistributedDataParallel& model, Optimizer& optimizer, int64_t sync_every,
               bool moments);

  int64_t sync_every() const noexcept { return sync_every_; }
  /// Whether the replicas are averaged after a step that ends so.
  bool is_sync_point(const StepEnd& end) const;

  void before_backward(bool last_batch) override;
  bool any_rank_overflowed(bool found_inf) override;
  void after_update(const StepEnd& end) override;
  /// Error (a bug, not a user's mistake) when the ranks' parameters differ after the last
  /// averaging.
  void after_run() override;

 private:
  void average(bool checkpoint);

  Optimizer& optimizer_;
  int64_t sync_every_;
  bool moments_;
};

}  // namespace minitrain
