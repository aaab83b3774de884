#pragma once
// --parallel dp: replicas in this process (parallel/data_parallel.h) that reduce their gradients
// inside DataParallel's backward, so the step has nothing to agree on but this: weights loaded
// into the model (a checkpoint resumed, --init) land in replica 0, and every other replica takes
// them before the next step.

#include "parallel/data_parallel.h"
#include "train/replica_sync.h"

namespace minitrain {

class DataParallelSync final : public ReplicaSync {
 public:
  explicit DataParallelSync(DataParallel& model) : model_(model) {}  ///< `model` outlives this
  void after_weights_loaded() override { model_.broadcast_replica0_parameters(); }

 private:
  DataParallel& model_;
};

}  // namespace minitrain
