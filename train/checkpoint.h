#pragma once
// A training checkpoint: one .safetensors file with the model's parameters ("model.0.weight"),
// the optimizer's state ("optim.0.weight.exp_avg") and, in its metadata, where the run stands:
// step, epoch and batch position in the data, the RNG state, the optimizer's scalars
// ("optim.steps", ...) and the run's config. Written atomically, so a crash mid-write keeps the
// previous checkpoint; loading validates every name and shape before changing anything.

#include <cstdint>
#include <map>
#include <string>

#include "nn/module.h"
#include "optim/optimizer.h"

namespace minitrain {

struct CheckpointPosition {
  int64_t step = 0;          ///< optimizer steps completed
  int64_t batches_seen = 0;  ///< batches consumed from the data loader, over all epochs
  int64_t epoch = 0;         ///< batches_seen / batches_per_epoch (from 0), for readers
  int64_t batch_index = 0;   ///< batches_seen % batches_per_epoch
  uint64_t rng_seed = 0;     ///< the run's Generator (seed, offset)
  uint64_t rng_offset = 0;
  // The layout of the run that wrote it (ddp: ranks x batch size), and where it stands in the data
  // in rows over all ranks, so that a run on another number of ranks can find the same place.
  // Checkpoints from before these fields read as one rank, global_batch 0 (unknown).
  int64_t world_size = 1;
  int64_t global_batch = 0;   ///< rows per batch over all ranks
  int64_t samples_seen = 0;   ///< rows consumed by all ranks together
  int64_t epoch_samples = 0;  ///< of which in the current epoch: batch_index * global_batch
};

/// The checkpoint file kept in a checkpoint directory: DIR/checkpoint.safetensors.
std::string checkpoint_path(const std::string& dir);

/// Writes model, optimizer and position (plus `extra` metadata, e.g. {"config": json}).
void save_checkpoint(const std::string& path, Module& model, const Optimizer& optimizer,
                     const CheckpointPosition& position,
                     const std::map<std::string, std::string>& extra = {});

/// Restores model and optimizer from `path` and returns the position. IoError for a missing or
/// malformed file (or one that is not a minitrain checkpoint); ValueError / ShapeError when it
/// does not fit the model or the optimizer, before either is changed.
CheckpointPosition load_checkpoint(const std::string& path, Module& model, Optimizer& optimizer);

/// The metadata of a checkpoint (for its "config"), without loading tensors into a model.
std::map<std::string, std::string> read_checkpoint_metadata(const std::string& path);

}  // namespace minitrain
