#pragma once
// What differs between one device and a run of several ranks in the Trainer's step: one small
// interface, one class per parallel mode (docs/replica_sync.md).
//
//   ReplicaSync (here)   one process: one device, mp's stages; nothing to agree on
//   DataParallelSync     --parallel dp: replicas in this process (train/data_parallel_sync.h)
//   DdpSync              --parallel ddp: a rank per process, gradients all-reduced (ddp_sync.h)
//   LocalSgdSync         --sync-every K: parameters averaged at sync points (local_sgd_sync.h)
//
// The Trainer calls the methods in this order within a step (docs/replica_sync.md):
//
//   for each batch: forward, loss, before_backward(last batch?), backward
//   reduce_loss(loss, stop)            the step's global loss, and whether any rank asked to stop
//   sum_over_ranks(counts)             classifiers: correct/counted of every rank's batch
//   any_rank_overflowed(found_inf)     float16: whether to skip the step, alike on every rank
//   optimizer step, then after_update(what follows the step)
//   at a checkpoint: writes_files() decides who writes, after_checkpoint() on every rank
//
// The defaults are one process's: a class overrides what its mode changes, and no more.

#include <cstdint>
#include <vector>

namespace minitrain {

/// What follows a step, for LocalSgdSync: the steps after which the weights are read.
struct StepEnd {
  int64_t step = 0;         ///< the step just taken, from 1
  bool last = false;        ///< the run's last step
  bool checkpoint = false;  ///< a checkpoint follows (also a stop's)
  bool evaluation = false;  ///< a held-out evaluation follows
};

/// One process training alone (also --parallel dp|mp: their replicas or stages agree inside their
/// module). The Trainer uses it when TrainerOptions::replica_sync is null.
class ReplicaSync {
 public:
  virtual ~ReplicaSync() = default;

  /// Ranks that each train a batch like this one: samples and samples/s count them all, and a
  /// checkpoint records the layout (ranks x batch size) and its position in global samples.
  virtual int world_size() const { return 1; }
  /// This process's rank; rank 0 alone writes the run's files (checkpoints, --save, --save-best).
  virtual int rank() const { return 0; }
  bool writes_files() const { return rank() == 0; }

  /// Before each backward of a step; `last_batch`: the step's last (DdpSync all-reduces then only).
  virtual void before_backward(bool /*last_batch*/) {}
  /// This rank's step loss -> the global batch's. Called on every rank once the step's last
  /// backward has returned (no gradient all-reduce in flight); the answer decides, alike on every
  /// rank, whether the step is finite. `stop` comes in as this rank's stop request and goes out
  /// as whether any rank asked, so that every rank stops after the same step.
  virtual double reduce_loss(double loss, bool& /*stop*/) { return loss; }
  /// Adds each entry over the ranks (the training batches' accuracy counts, held-out sums).
  virtual void sum_over_ranks(std::vector<double>& /*values*/) {}
  /// float16 loss scaling: whether any rank's gradients held an inf/NaN, given this rank's; the
  /// step is skipped alike on every rank.
  virtual bool any_rank_overflowed(bool found_inf) { return found_inf; }
  /// After the optimizer step of a finite step (taken or skipped for an overflow).
  virtual void after_update(const StepEnd& /*end*/) {}
  /// After a checkpoint's weights were loaded into the model (Trainer::resume).
  virtual void after_weights_loaded() {}
  /// After each checkpoint, written or not: no rank goes on (or reads the file) before rank 0 has
  /// committed it.
  virtual void after_checkpoint() {}
  /// After the run's last step (LocalSgdSync checks that every rank holds one model).
  virtual void after_run() {}
  /// After the run's final files are written: no rank returns before they are.
  virtual void after_save() {}
};

}  // namespace minitrain
