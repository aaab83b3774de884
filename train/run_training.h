#pragma once
// Everything `minitrain train` does once its flags are parsed: check the settings, read the data,
// build model and optimizer, train, write the final weights. Every input is checked before the
// first step, and the files a run writes at its end (--save) are written only by a run that
// finished, atomically: a failed run never replaces them.

#include <atomic>
#include <cstdint>
#include <ostream>
#include <string>

#include "train/config.h"
#include "train/run_data.h"  // synthetic_rows, kDefaultSyntheticRows
#include "train/trainer.h"

namespace minitrain {

struct TrainReport {
  TrainSummary summary;
  int64_t total_steps = 0;
  int64_t resumed_from_step = -1;  ///< -1: a fresh run
  std::string device;
  std::string saved;             ///< --save, when written
  std::string saved_best;        ///< --save-best, when an evaluation wrote it
  int rank = 0, world_size = 1;  ///< --parallel ddp: this process's rank and the job's ranks
};

/// `info` gets a line on what is trained where, and where results went; `progress` the progress
/// display (a bar or lines, per config.progress). Throws the library's typed errors.
/// --parallel ddp: one call per rank (mpirun, minitrain launch); rank 0 alone writes to `info`,
/// `progress`, --save and checkpoints, and rank r > 0 logs to --log with ".rank<r>" inserted.
/// `stop_requested` (see StopOnSignals): once nonzero, the run stops after the step in progress,
/// checkpoints (with --checkpoint-dir) and saves (--save) as at its end; report.summary says so.
TrainReport run_training(const TrainConfig& config, std::ostream& info, std::ostream& progress,
                         const std::atomic<int>* stop_requested = nullptr);

}  // namespace minitrain
