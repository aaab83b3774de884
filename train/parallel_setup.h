#pragma once
// `minitrain train --parallel none|dp|mp|ddp`: what a run's parallel mode sets up before its first
// step. A ddp rank joins the process group (and checks that every rank was given the same run);
// the model is built from --seed and wrapped for its mode (DataParallel replicas, ModelParallel
// stages, DistributedDataParallel, or ddp over pipelines: the hybrid); its optimizer is made; and
// the mode's ReplicaSync (train/replica_sync.h) is what the Trainer steps with.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/generator.h"
#include "nn/module.h"
#include "nn/mlp.h"
#include "nn/sequential.h"
#include "optim/optimizer.h"
#include "parallel/comm/communicator.h"
#include "parallel/data_parallel.h"
#include "parallel/distributed_data_parallel.h"
#include "parallel/launch/process_env.h"
#include "parallel/model_parallel.h"
#include "train/config.h"
#include "train/replica_sync.h"

namespace minitrain {

/// Where a run's model goes.
struct ParallelPlan {
  Device device = Device::cpu();  ///< where batches arrive and the loss is computed
  std::vector<Device> devices;    ///< dp replicas, mp or hybrid stages; empty otherwise
  bool dp = false, mp = false, ddp = false;
  ProcessEnv env;  ///< a single process unless ddp
};

/// What the model, and each of dp's replicas, is built from (--model, --activation, --gemm,
/// --precision).
struct ModelRecipe {
  std::vector<int64_t> sizes;
  Activation activation = Activation::ReLU;
  std::string gemm;                   ///< --gemm, or what --allow-tf32 makes of auto on a GPU
  DType precision = DType::Float32;   ///< --precision
  std::string mlp_kernel = "layers";  ///< --mlp-kernel

  /// The MLP on `device`, its weights drawn from `gen`; its input is data (no input gradient).
  std::unique_ptr<Sequential> build(Generator& gen, Device device) const;
};

/// The devices of dp's replicas, mp's stages or the hybrid's (--devices, else `device` repeated;
/// under ddp `device` is already this rank's); each checked to exist.
std::vector<Device> parallel_devices(const TrainConfig& c, Device device);

/// A run's model on its devices and what its Trainer synchronises with.
struct ParallelSetup {
  std::unique_ptr<Communicator> comm;  ///< ddp; first: the model uses it until destroyed
  std::unique_ptr<Module> model;       ///< wrapped for the mode
  DataParallel* data_parallel = nullptr;
  ModelParallel* model_parallel = nullptr;
  DistributedDataParallel* distributed = nullptr;
  std::unique_ptr<Optimizer> optimizer;
  std::unique_ptr<ReplicaSync> sync;  ///< never null

  int rank() const noexcept { return sync->rank(); }
  int world_size() const noexcept { return sync->world_size(); }
};

/// Sets up the run's mode: the process group (ddp), the model built from `gen` as the one-device
/// run builds it (so every mode starts from its weights), --init loaded, the optimizer, the sync.
ParallelSetup set_up_parallel(const TrainConfig& c, const ParallelPlan& plan,
                              const ModelRecipe& recipe, Generator& gen);

/// "data parallel: 4 replicas" or "distributed data parallel: 2 ranks (...)"; empty otherwise.
std::string describe_replicas(const TrainConfig& c, const ParallelSetup& s);
/// "model parallel: 3 stages, 5 micro-batches, bubble 29%"; empty without stages.
std::string describe_stages(const ParallelSetup& s);

}  // namespace minitrain
