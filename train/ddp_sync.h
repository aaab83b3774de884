#pragma once
// --parallel ddp: one replica per process (rank), torch's DistributedDataParallel. The wrapper
// all-reduces the gradients during backward; what the step adds is said here: only a step's last
// batch all-reduces (torch's no_sync for the others), the step's loss and a stop request travel
// in one all-reduce, counts are summed over the ranks, rank 0 alone writes the run's files, and a
// barrier follows each checkpoint and the final save.

#include "parallel/comm/communicator.h"
#include "parallel/distributed_data_parallel.h"
#include "train/replica_sync.h"

namespace minitrain {

class DdpSync : public ReplicaSync {
 public:
  /// `model` and its communicator outlive this object.
  explicit DdpSync(DistributedDataParallel& model);

  int world_size() const override { return comm_.size(); }
  int rank() const override { return comm_.rank(); }
  void before_backward(bool last_batch) override;
  double reduce_loss(double loss, bool& stop) override;
  void sum_over_ranks(std::vector<double>& values) override;
  void after_checkpoint() override { comm_.barrier(); }
  void after_save() override { comm_.barrier(); }

 protected:
  DistributedDataParallel& model_;
  Communicator& comm_;
};

}  // namespace minitrain
