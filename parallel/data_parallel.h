#pragma once
// Replicated data parallelism in one process (torch.nn.DataParallel's idea, with the per-replica
// optimizer step of DistributedDataParallel): one replica of the model per device (several CPU
// replicas allowed), one host thread per replica. forward scatters the batch's rows (uneven splits
// allowed), runs every replica at once and gathers the outputs on devices[0]; backward scatters
// the output gradient, runs every backward at once and all-reduces (sums) the parameter
// gradients, so every replica holds the gradient of the whole batch.
//
// Note [data-parallel gradient weighting]: the loss is computed on the gathered output, so its
// gradient already carries the global batch's 1/N (MSELoss mean); each replica's backward gives
// its rows' share and the SUM over replicas is exactly the one-device gradient, however unevenly
// the rows were split. Averaging instead would be wrong for uneven splits.

#include <functional>
#include <memory>
#include <vector>

#include "nn/module.h"
#include "optim/make_optimizer.h"
#include "parallel/comm/communicator.h"

namespace minitrain {

class DataParallel final : public Module {
 public:
  using ReplicaFactory = std::function<std::unique_ptr<Module>(Device)>;

  /// Builds one replica per device with `make_replica`, then broadcasts replica 0's parameters to
  /// the others. ValueError for no devices; DeviceError for an unavailable one.
  DataParallel(const ReplicaFactory& make_replica, std::vector<Device> devices,
               CommOptions options = {});
  ~DataParallel() override;

  Tensor forward(const Tensor& x) override;             ///< x on any device; output on devices[0]
  Tensor backward(const Tensor& grad_output) override;  ///< returns dx on devices[0] (undefined if
                                                        ///< the replicas skip input gradients)
  /// Replica 0's parameters (the names of the wrapped model: "0.weight", ...).
  NamedParameters named_parameters(const std::string& prefix = "") override;
  void to(Device device) override;  ///< DeviceError: replicas stay where they are
  void train(bool on = true) override;
  std::string repr() const override;

  /// An optimizer that steps every replica's parameters the same way (one optimizer per replica,
  /// run in the replicas' threads), so the replicas stay identical. Its state is replica 0's.
  std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config);

  /// Gives every replica replica 0's parameter values (after loading weights into
  /// named_parameters(), which are replica 0's), in the replicas' threads and streams.
  void broadcast_replica0_parameters();

  int replicas() const noexcept;
  Module& replica(int i);
  const std::vector<Device>& devices() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace minitrain
